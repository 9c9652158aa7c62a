//! The tools over TLS, against Debian's redis-server 7.0 with a tls-port (and Redis's default
//! tls-auth-clients yes): `rdbtool restore --to rediss://` gives the source's DEBUG DIGEST,
//! `aoftool capture rediss://` follows a master under writes into a directory a real Redis
//! loads with the master's digest, and a certificate the CA did not sign, or no client
//! certificate, stops the tool with an error before anything is written.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::redis::{resp_all, spawn_capture};
use ferrokv_testkit::certs::Certs;
use ferrokv_testkit::{free_port, info_field, pipe_into, wait_for, Client, Server as Redis, TempDir};

fn run(bin: &str, args: &[String]) -> Output {
    Command::new(bin).args(args).output().expect("tool")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A real Redis with a TLS port beside its plain one (used for checks).
fn tls_redis(certs: &Certs) -> (Redis, u16) {
    let tls_port = free_port();
    let args = certs.server_args(tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Redis::start_with(None, &args), tls_port)
}

/// --cacert, --cert and --cert-key of the test's certificates.
fn client_args(certs: &Certs) -> Vec<String> {
    ["--cacert", "ca.crt", "--cert", "client.crt", "--cert-key", "client.key"]
        .chunks(2)
        .flat_map(|p| [p[0].to_string(), certs.file(p[1])])
        .collect()
}

#[test]
fn restore_and_split_reach_a_tls_redis() {
    let certs = Certs::make();
    let source = Redis::start();
    let mut commands = Vec::new();
    for i in 0..2000 {
        let s = i.to_string();
        commands.push(vec!["SET".to_string(), format!("k:{i}"), s.repeat(i % 50 + 1)]);
        commands.push(vec!["HSET".into(), format!("h:{i}"), "f".into(), s.clone(), "g".into(), "v".into()]);
        if i % 10 == 0 {
            commands.push(vec!["ZADD".into(), format!("z:{i}"), "1.5".into(), "a".into(), s.clone(), "b".into()]);
            commands.push(vec!["PEXPIRE".into(), format!("k:{i}"), "100000000".into()]);
        }
    }
    pipe_into(source.port, &resp_all(&commands));
    let digest = source.cli(&["DEBUG", "DIGEST"]);
    source.cli(&["SAVE"]);
    let saved = source.stop();
    let rdb = saved.path().join("dump.rdb").display().to_string();

    let (target, tls_port) = tls_redis(&certs);
    let url = format!("rediss://127.0.0.1:{tls_port}");
    let restore = |extra: &[String]| {
        let mut args = vec!["restore".to_string(), rdb.clone(), "--to".into(), url.clone(), "--json".into()];
        args.extend(extra.iter().cloned());
        run(env!("CARGO_BIN_EXE_rdbtool"), &args)
    };

    // A CA that did not sign the server's certificate: refused at the handshake.
    let wrong_ca = vec!["--cacert".to_string(), certs.file("client.crt")];
    let out = restore(&wrong_ca);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("TLS handshake"), "{}", text(&out));
    // No client certificate: the server (tls-auth-clients yes) ends the session.
    let out = restore(&["--cacert".to_string(), certs.file("ca.crt")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("TLS: received fatal alert: CertificateRequired"), "{}", text(&out));
    assert_eq!(target.cli(&["DBSIZE"]), "0");
    // The plain port, taken for a TLS one: said so, not a bare timeout.
    let mut args =
        vec!["restore".to_string(), rdb.clone(), "--to".into(), format!("rediss://127.0.0.1:{}", target.port)];
    args.extend(client_args(&certs));
    let out = run(env!("CARGO_BIN_EXE_rdbtool"), &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is this its TLS port?"), "{}", text(&out));

    let out = restore(&client_args(&certs));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sum: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json summary");
    assert_eq!(sum["keys"].as_u64(), Some(4200), "{sum}");
    assert_eq!(target.cli(&["DEBUG", "DIGEST"]), digest);

    // --insecure takes any certificate (a client certificate is still given for the server).
    target.cli(&["FLUSHALL"]);
    let insecure: Vec<String> = client_args(&certs).into_iter().skip(2).chain(["--insecure".to_string()]).collect();
    let out = restore(&insecure);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(target.cli(&["DEBUG", "DIGEST"]), digest);

    // TLS options with a plain URL are refused rather than ignored.
    let mut args = vec!["restore".to_string(), rdb.clone(), "--to".into(), format!("redis://127.0.0.1:{tls_port}")];
    args.extend(client_args(&certs));
    let out = run(env!("CARGO_BIN_EXE_rdbtool"), &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("use rediss:// or --tls"), "{}", text(&out));
}

#[test]
fn capture_follows_a_tls_redis() {
    let certs = Certs::make();
    let (master, tls_port) = tls_redis(&certs);
    // A backlog the writes of a reconnection's second cannot outrun on a busy machine.
    assert_eq!(master.cli(&["CONFIG", "SET", "repl-backlog-size", "64mb"]), "OK");
    master.cli(&["SET", "before", "the capture"]);
    let out = TempDir::new("capture-tls");
    let dir = out.path().join("appendonlydir");
    let mut tls = vec!["--tls".to_string()];
    tls.extend(client_args(&certs));
    let child = spawn_capture(&format!("127.0.0.1:{tls_port}"), &tls, &dir, 4);
    wait_for("the capture to attach", || info_field(master.port, "replication", "connected_slaves") == "1");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let port = master.port;
        std::thread::spawn(move || {
            let mut c = Client::connect(port);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                c.call_str(&["INCR", &format!("n{}", i % 50)]);
                c.call_str(&["RPUSH", "list", &"x".repeat((i % 200) as usize)]);
                i += 1;
            }
            i
        })
    };
    std::thread::sleep(Duration::from_millis(1000));
    // A dropped link continues over a new TLS session.
    assert_eq!(master.cli(&["CLIENT", "KILL", "TYPE", "replica"]), "1");
    wait_for("the capture to come back", || info_field(master.port, "replication", "connected_slaves") == "1");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().expect("writer") > 100);
    let done = child.wait_with_output().expect("aoftool capture");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    let sum: serde_json::Value = serde_json::from_slice(&done.stdout).expect("json summary");
    assert_eq!((sum["full_syncs"].as_u64(), sum["partial_syncs"].as_u64()), (Some(1), Some(1)), "{stderr}");
    assert_eq!(
        sum["offset"].as_u64().map(|o| o.to_string()),
        Some(info_field(master.port, "replication", "master_repl_offset"))
    );
    let digest = master.cli(&["DEBUG", "DIGEST"]);
    let loaded = Redis::start_in(out, &["--appendonly", "yes", "--appenddirname", "appendonlydir"]);
    assert_eq!(loaded.cli(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(loaded.cli(&["GET", "before"]), "the capture");
}
