//! TLS on `tls-port`, against Debian's redis-server 7.0 (built with TLS) started the same
//! way: redis-cli --tls with and without a client certificate, a big value and a pipeline
//! over TLS, and CONFIG SET of tls-* files, tls-protocols, tls-auth-clients, tls-port, port
//! and bind, every reply compared with Redis's.

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod support;
use support::Ours;

use ferrokv_testkit::certs::Certs;
use ferrokv_testkit::{cli, free_port, Server, TempDir};

/// redis-cli over TLS.
trait TlsCli {
    fn cli(&self, port: u16, cert: bool, args: &[&str]) -> String;
    fn cli_stdin(&self, port: u16, cert: bool, args: &[&str], stdin: Option<PathBuf>) -> String;
}

impl TlsCli for Certs {
    /// redis-cli over TLS: stdout and stderr, trimmed; `cert` with the client certificate.
    fn cli(&self, port: u16, cert: bool, args: &[&str]) -> String {
        self.cli_stdin(port, cert, args, None)
    }

    fn cli_stdin(&self, port: u16, cert: bool, args: &[&str], stdin: Option<PathBuf>) -> String {
        let mut cmd = Command::new("timeout");
        cmd.args(["60", "redis-cli", "-p", &port.to_string(), "--tls", "--cacert", &self.file("ca.crt")]);
        if cert {
            cmd.args(["--cert", &self.file("client.crt"), "--key", &self.file("client.key")]);
        }
        cmd.args(args);
        match stdin {
            Some(p) => cmd.stdin(std::fs::File::open(p).expect("stdin file")),
            None => cmd.stdin(Stdio::null()),
        };
        let out = cmd.output().expect("redis-cli");
        let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !err.is_empty() {
            text.push_str(&format!(" [stderr: {err}]"));
        }
        text
    }
}

/// Ports and handles of one server under test.
struct Running {
    plain: u16,
    tls: u16,
    _redis: Option<Server>,
    _ours: Option<(Ours, TempDir)>,
}

fn start(redis: bool, certs: &Certs) -> Running {
    let tls = free_port();
    let args = certs.server_args(tls);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if redis {
        let s = Server::start_with(None, &args);
        Running { plain: s.port, tls, _redis: Some(s), _ours: None }
    } else {
        let dir = TempDir::new("tls-ours");
        let s = Ours::start(dir.path(), &args);
        Running { plain: s.port, tls, _redis: None, _ours: Some((s, dir)) }
    }
}

/// Everything one server answers, in order, for the same steps.
fn session(redis: bool, certs: &Certs, work: &TempDir) -> Vec<String> {
    let s = start(redis, certs);
    let mut seen = Vec::new();
    let mut note = |what: &str, reply: String| seen.push(format!("{what}: {reply}"));
    note("ping with a client certificate", certs.cli(s.tls, true, &["PING"]));
    let without = certs.cli(s.tls, false, &["PING"]);
    note("ping without one answers", (without == "PONG").to_string());
    note("plain port", cli(s.plain, &["PING"]));

    // A value of 3 MB there and back.
    let big: String = (0..3_000_000u32).map(|i| char::from(b'a' + (i * 7 % 26) as u8)).collect();
    let big_file = work.path().join(format!("big-{redis}"));
    std::fs::write(&big_file, &big).expect("write value");
    note("set big", certs.cli_stdin(s.tls, true, &["-x", "SET", "big"], Some(big_file)));
    note("get big", (certs.cli(s.tls, true, &["GET", "big"]) == big).to_string());

    // 20,000 commands in one pipeline.
    let pipe_file = work.path().join(format!("pipe-{redis}"));
    let cmds: Vec<u8> = (0..20_000)
        .flat_map(|i| {
            ferrokv_testkit::encode_command(&[b"SET".to_vec(), format!("k{i}").into_bytes(), vec![b'v'; 100]])
        })
        .collect();
    std::fs::write(&pipe_file, cmds).expect("write pipeline");
    let piped = certs.cli_stdin(s.tls, true, &["--pipe"], Some(pipe_file));
    note("pipe", piped.lines().last().unwrap_or_default().to_string());
    note("dbsize", certs.cli(s.tls, true, &["DBSIZE"]));

    // Reconfiguration, over the plain port.
    let cfg = |args: &[&str]| cli(s.plain, &[&["CONFIG", "SET"][..], args].concat());
    note("missing cert file", cfg(&["tls-cert-file", "/nonexistent/cert.pem"]));
    note("ping after refusal", certs.cli(s.tls, true, &["PING"]));
    note("bad protocols", cfg(&["tls-protocols", "SSLv3"]));
    note("tls 1.2 only", cfg(&["tls-protocols", "TLSv1.2"]));
    note("ping over tls 1.2", certs.cli(s.tls, true, &["PING"]));
    note("auth-clients no", cfg(&["tls-auth-clients", "no"]));
    note("ping without a certificate", certs.cli(s.tls, false, &["PING"]));
    let tls2 = free_port();
    note("tls-port", cfg(&["tls-port", &tls2.to_string()]));
    note("ping on the new tls port", certs.cli(tls2, false, &["PING"]));
    let old = certs.cli(s.tls, false, &["PING"]);
    note("old tls port answers", (old == "PONG").to_string());
    note("bad bind", cfg(&["bind", "999.999.999.999"]));
    note("ping after bad bind", cli(s.plain, &["PING"]));
    note("another bind, same ports", cfg(&["bind", "127.0.0.1 -::1"]));
    note("ping after the new bind", cli(s.plain, &["PING"]));
    note("tls after the new bind", certs.cli(tls2, false, &["PING"]));
    let plain2 = free_port();
    note("port", cfg(&["port", &plain2.to_string()]));
    note("ping on the new port", cli(plain2, &["PING"]));
    note("old port answers", (cli(s.plain, &["PING"]) == "PONG").to_string());
    let mut tls_params: Vec<String> =
        cli(plain2, &["CONFIG", "GET", "tls-*"]).lines().map(str::to_string).collect::<Vec<_>>();
    // name/value pairs, sorted by name; the ports differ between the two runs.
    let mut pairs: Vec<(String, String)> =
        tls_params.chunks(2).map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default())).collect();
    pairs.retain(|(n, _)| n != "tls-port");
    pairs.sort();
    tls_params.clear();
    note("config get tls-*", format!("{pairs:?}"));
    seen
}

#[test]
fn tls_answers_as_redis_does() {
    let certs = Certs::make();
    let work = TempDir::new("tls-work");
    let redis = session(true, &certs, &work);
    let ours = session(false, &certs, &work);
    for (r, o) in redis.iter().zip(&ours) {
        assert_eq!(o, r, "ferrokv differs from Redis");
    }
    assert_eq!(redis.len(), ours.len());
    // What the comparison rests on: TLS worked on both, with and without client auth.
    assert!(ours[0].ends_with("PONG") && !ours[1].ends_with("true"), "{ours:?}");
}

#[test]
fn a_tls_port_without_certificates_stops_the_start() {
    let dir = TempDir::new("tls-nocert");
    let out = Command::new("timeout")
        .args(["30", env!("CARGO_BIN_EXE_ferrokv-server"), "--port", &free_port().to_string()])
        .args(["--tls-port", &free_port().to_string(), "--save", ""])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .expect("run ferrokv-server");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("No tls-cert-file configured!") && text.contains("Failed to configure TLS"), "{text}");
}

/// Replication over TLS (`tls-replication yes`, client certificates from
/// tls-client-cert-file), both ways: ferrokv a replica of a real Redis 7.0 master on its
/// TLS port, and a real Redis a replica of ferrokv's; the full sync and the stream after it.
#[test]
fn replication_runs_over_tls_both_ways() {
    let certs = Certs::make();
    let replica_args = |tls_port: u16| {
        let mut a = certs.server_args(tls_port);
        a.extend([
            "--tls-replication".into(),
            "yes".into(),
            "--tls-client-cert-file".into(),
            certs.file("client.crt"),
            "--tls-client-key-file".into(),
            certs.file("client.key"),
        ]);
        a
    };
    for ours_is_master in [false, true] {
        let (mtls, rtls) = (free_port(), free_port());
        let margs = replica_args(mtls);
        let rargs = replica_args(rtls);
        let margs: Vec<&str> = margs.iter().map(String::as_str).collect();
        let rargs: Vec<&str> = rargs.iter().map(String::as_str).collect();
        let dir = TempDir::new("tls-repl");
        let (mplain, _m, rplain, _r): (u16, Box<dyn std::any::Any>, u16, Box<dyn std::any::Any>) = if ours_is_master {
            let m = Ours::start(dir.path(), &margs);
            let r = Server::start_with(None, &rargs);
            (m.port, Box::new(m), r.port, Box::new(r))
        } else {
            let m = Server::start_with(None, &margs);
            let r = Ours::start(dir.path(), &rargs);
            (m.port, Box::new(m), r.port, Box::new(r))
        };
        cli(mplain, &["SET", "before", "1"]);
        cli(mplain, &["HSET", "h", "f", "v"]);
        assert_eq!(cli(rplain, &["REPLICAOF", "127.0.0.1", &mtls.to_string()]), "OK");
        ferrokv_testkit::wait_for("the replica's link up", || {
            ferrokv_testkit::info_field(rplain, "replication", "master_link_status") == "up"
        });
        cli(mplain, &["SET", "after", "2"]);
        ferrokv_testkit::wait_for("the stream over TLS", || cli(rplain, &["GET", "after"]) == "2");
        assert_eq!(cli(rplain, &["HGET", "h", "f"]), "v", "ours is master: {ours_is_master}");
        assert_eq!(cli(rplain, &["GET", "before"]), "1");
    }
}
