//! Function libraries as the dataset holds them: each library's source code, by name.
//!
//! Compiling and running a library is the server's (Lua). The engine keeps the code with
//! the keys, saves it as Redis does (a FUNCTION2 record per library in RDB files and AOF
//! bases, `FUNCTION LOAD` in a RESP base, FUNCTION DUMP payloads), loads it back, and
//! replays the FUNCTION subcommands an AOF holds, checking what can be checked without
//! running the code: the shebang, the engine, the name, duplicates. FLUSHALL leaves the
//! libraries alone, as in Redis.

use std::collections::BTreeMap;

use crate::format::rdb::{function_payload, read_function_payload, Encoder};

/// A library's first line: `#!<engine> name=<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub engine: String,
    pub name: String,
    /// Where the code after the shebang line starts.
    pub body: usize,
}

/// Parse a library's shebang as Redis's functionExtractLibMetaData does; errors are Redis's
/// texts (after "ERR ").
pub fn header(code: &[u8]) -> Result<Header, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match crate::format::args::split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err("Invalid metadata value, name argument was given multiple times".into());
            }
            name = Some(String::from_utf8_lossy(&p[5..]).into_owned());
            continue;
        }
        return Err(format!("Invalid metadata value given: {}", String::from_utf8_lossy(p)));
    }
    let name = name.ok_or("Library name was not given")?;
    Ok(Header { engine, name, body: end })
}

/// Redis's rule for library and function names: letters, digits and underscores, at
/// least one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// The checks of FUNCTION LOAD that need no interpreter: the header, the engine (Lua is the
/// only one), the name. Returns the library's name.
pub fn check(code: &[u8]) -> Result<String, String> {
    let h = header(code)?;
    if !valid_name(&h.name) {
        return Err(BAD_NAME.into());
    }
    if !h.engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{}' not found", h.engine));
    }
    Ok(h.name)
}

/// FUNCTION RESTORE's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    Append,
    Replace,
    Flush,
}

impl RestorePolicy {
    pub fn parse(arg: &[u8]) -> Option<RestorePolicy> {
        match arg.to_ascii_lowercase().as_slice() {
            b"append" => Some(RestorePolicy::Append),
            b"replace" => Some(RestorePolicy::Replace),
            b"flush" => Some(RestorePolicy::Flush),
            _ => None,
        }
    }
}

/// The libraries' code, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Libraries {
    by_name: BTreeMap<String, Vec<u8>>,
}

impl Libraries {
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// (name, code), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.by_name.iter().map(|(n, c)| (n.as_str(), c.as_slice()))
    }

    /// Every library's code, by name.
    pub fn codes(&self) -> Vec<Vec<u8>> {
        self.by_name.values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.by_name.get(name).map(Vec::as_slice)
    }

    /// Add a library the interpreter accepted (or, without one, that [`check`] passed),
    /// replacing one of the same name.
    pub fn insert(&mut self, name: String, code: Vec<u8>) {
        self.by_name.insert(name, code);
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    pub fn clear(&mut self) {
        self.by_name.clear();
    }

    /// A library read from a file (an RDB's FUNCTION2 record): an existing name is an error,
    /// as Redis's loader makes it.
    pub fn load(&mut self, code: Vec<u8>) -> Result<(), String> {
        let name = check(&code)?;
        if self.by_name.contains_key(&name) {
            return Err(format!("Library '{name}' already exists"));
        }
        self.by_name.insert(name, code);
        Ok(())
    }

    /// FUNCTION LOAD [REPLACE] without an interpreter (an AOF being replayed).
    pub fn load_command(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let name = check(code)?;
        if !replace && self.by_name.contains_key(&name) {
            return Err(format!("Library '{name}' already exists"));
        }
        self.by_name.insert(name.clone(), code.to_vec());
        Ok(name)
    }

    /// FUNCTION DUMP's payload, for the encoder's RDB version.
    pub fn dump(&self, enc: &Encoder) -> Vec<u8> {
        function_payload(enc, &self.by_name.values().collect::<Vec<_>>())
    }

    /// FUNCTION RESTORE without an interpreter: the payload's libraries under `policy`, all
    /// or nothing. `max_version` is the newest RDB version accepted.
    pub fn restore(&mut self, payload: &[u8], policy: RestorePolicy, max_version: u16) -> Result<(), String> {
        let codes = read_function_payload(payload, max_version).map_err(|e| e.to_string())?;
        let mut incoming = Libraries::default();
        for code in codes {
            incoming.load(code)?;
        }
        self.merge(incoming, policy)
    }

    /// Apply restored libraries under `policy`, all or nothing (Redis's libraryJoin; the
    /// error texts are its).
    pub fn merge(&mut self, incoming: Libraries, policy: RestorePolicy) -> Result<(), String> {
        match policy {
            RestorePolicy::Flush => *self = incoming,
            RestorePolicy::Append => {
                if let Some(n) = incoming.by_name.keys().find(|n| self.by_name.contains_key(*n)) {
                    return Err(format!("Library {n} already exists"));
                }
                self.by_name.extend(incoming.by_name);
            }
            RestorePolicy::Replace => self.by_name.extend(incoming.by_name),
        }
        Ok(())
    }

    /// Replay one FUNCTION command from an AOF (LOAD, DELETE, FLUSH, RESTORE; the others
    /// change nothing). Errors are Redis's texts; Redis logs them and goes on loading.
    pub fn replay(&mut self, argv: &[Vec<u8>], max_version: u16) -> Result<(), String> {
        let Some(sub) = argv.get(1).map(|s| s.to_ascii_lowercase()) else {
            return Err("wrong number of arguments for 'function' command".into());
        };
        match sub.as_slice() {
            b"load" if argv.len() >= 3 => {
                let replace = argv[2..argv.len() - 1].iter().all(|a| a.eq_ignore_ascii_case(b"replace"));
                if !replace {
                    return Err("Unknown option given".into());
                }
                self.load_command(&argv[argv.len() - 1], argv.len() > 3).map(|_| ())
            }
            b"delete" if argv.len() == 3 => {
                if self.remove(&String::from_utf8_lossy(&argv[2])) {
                    Ok(())
                } else {
                    Err("Library not found".into())
                }
            }
            b"flush" => {
                self.clear();
                Ok(())
            }
            b"restore" if (3..=4).contains(&argv.len()) => {
                let policy = match argv.get(3) {
                    None => RestorePolicy::Append,
                    Some(p) => RestorePolicy::parse(p).ok_or(
                        "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".to_string(),
                    )?,
                };
                self.restore(&argv[2], policy, max_version)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rdb::Target;

    const LIB: &[u8] = b"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return args[1] end)";

    #[test]
    fn headers_as_redis_reads_them() {
        assert_eq!(header(LIB).unwrap(), Header { engine: "lua".into(), name: "mylib".into(), body: 16 });
        assert_eq!(header(b"return 1").unwrap_err(), "Missing library metadata");
        assert_eq!(header(b"#!lua name=x").unwrap_err(), "Invalid library metadata");
        assert_eq!(header(b"#!lua\n").unwrap_err(), "Library name was not given");
        assert_eq!(header(b"#!lua foo=b\n").unwrap_err(), "Invalid metadata value given: foo=b");
        assert_eq!(
            header(b"#!lua name=a NAME=b\n").unwrap_err(),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(check(b"#!js name=x\n").unwrap_err(), "Engine 'js' not found");
        assert_eq!(check(b"#!lua name=a-b\n").unwrap_err(), BAD_NAME);
        assert_eq!(check(b"#!LUA name=ok\n").unwrap(), "ok");
    }

    /// The bytes of Redis 7.4.1's FUNCTION DUMP of LIB (docs: research of the session).
    #[test]
    fn dump_is_redis_s_bytes() {
        let mut l = Libraries::default();
        l.load(LIB.to_vec()).unwrap();
        let mut enc = Encoder::new(Target::Redis74);
        enc.limits.compression = true;
        let hex: String = l.dump(&enc).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "f5c34056405b1f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e6374696f6e28276d79\
             400b02272c2040066012116b6579732c2061726773292072657475726e600c075b315d20656e64290c00462f026d3ccd9993"
        );
    }

    #[test]
    fn restore_policies() {
        let mut enc = Encoder::new(Target::Redis70);
        enc.limits.compression = true;
        let mut src = Libraries::default();
        src.load(LIB.to_vec()).unwrap();
        let payload = src.dump(&enc);
        let mut l = Libraries::default();
        l.restore(&payload, RestorePolicy::Append, 10).unwrap();
        assert_eq!(l.restore(&payload, RestorePolicy::Append, 10).unwrap_err(), "Library mylib already exists");
        l.restore(&payload, RestorePolicy::Replace, 10).unwrap();
        assert_eq!(l.len(), 1);
        let empty = Libraries::default().dump(&enc);
        l.restore(&empty, RestorePolicy::Flush, 10).unwrap();
        assert!(l.is_empty());
        assert_eq!(
            l.restore(&payload, RestorePolicy::Append, 9).unwrap_err(),
            "DUMP payload version or checksum are wrong"
        );
    }

    #[test]
    fn aof_commands_replay() {
        let argv = |a: &[&[u8]]| a.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
        let mut l = Libraries::default();
        l.replay(&argv(&[b"FUNCTION", b"LOAD", LIB]), 10).unwrap();
        assert!(l.replay(&argv(&[b"FUNCTION", b"LOAD", LIB]), 10).is_err());
        l.replay(&argv(&[b"function", b"load", b"REPLACE", LIB]), 10).unwrap();
        l.replay(&argv(&[b"FUNCTION", b"DELETE", b"mylib"]), 10).unwrap();
        assert!(l.is_empty());
        l.replay(&argv(&[b"FUNCTION", b"LOAD", LIB]), 10).unwrap();
        l.replay(&argv(&[b"FUNCTION", b"FLUSH", b"ASYNC"]), 10).unwrap();
        assert!(l.is_empty());
    }
}
