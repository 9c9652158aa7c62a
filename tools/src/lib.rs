//! ferrokv-tools: the library behind `rdbtool` and `aoftool`. Binaries stay thin; everything testable
//! lives here.

pub mod against;
pub mod aof;
pub mod convert;
pub mod dataset;
pub mod diff;
pub mod dump;
pub mod generate;
pub mod jsonl_read;
pub mod jsonw;
pub mod memory;
pub mod net;
#[cfg(test)]
mod one_pass_samples;
pub mod out;
pub mod parquet_out;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod report;
pub mod restore;
pub mod rewrite;
pub mod split;
pub mod verify;

/// Exit codes shared by every tool (docs/cli.md).
pub mod exit {
    /// Success; for verify, the file is valid.
    pub const OK: u8 = 0;
    /// The input is invalid or corrupt (the error names file, offset, db and key).
    pub const INVALID: u8 = 1;
    /// Usage error, unreadable input, or an output error.
    pub const ERROR: u8 = 2;
}

/// A `--redis-version` value (clap's value parser for every tool that takes one).
pub fn parse_server_version(s: &str) -> Result<ferrokv::command::catalog::ServerVersion, String> {
    ferrokv::command::catalog::ServerVersion::parse(s)
        .ok_or_else(|| format!("unknown version '{s}' (6.2, 7.0, 7.2, 7.4, valkey-7.2, valkey-8.0)"))
}

/// A point in time (`--until`), as unix milliseconds: unix seconds (`1700000000`, with a
/// fraction `1700000000.25`), RFC 3339 (`2026-11-27T08:00:00Z`, `...+01:00`), or
/// milliseconds with a suffix (`1700000000000ms`). A bare number too large for seconds
/// (past the year 5000) is refused rather than read 1000 times too far.
pub fn parse_until(s: &str) -> Result<i64, String> {
    let t = s.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        return ms.parse::<i64>().map_err(|_| format!("'{s}': expected milliseconds before 'ms'"));
    }
    if t.contains(['T', 't', ' ']) && t.contains('-') {
        let ts: jiff::Timestamp = t.parse().map_err(|e| format!("'{s}': not an RFC 3339 time: {e}"))?;
        return Ok(ts.as_millisecond());
    }
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let bad = || format!("'{s}': expected unix seconds, an RFC 3339 time or milliseconds ending in 'ms'");
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: i64 = whole.parse().map_err(|_| bad())?;
    if secs >= 100_000_000_000 {
        return Err(format!("'{s}' is past the year 5000 in seconds: for milliseconds write '{s}ms'"));
    }
    // The fraction to milliseconds (its first three digits).
    let ms_digits: String = frac.chars().chain("000".chars()).take(3).collect();
    let ms: i64 = ms_digits.parse().map_err(|_| bad())?;
    Ok(secs * 1000 + ms)
}

/// Milliseconds since the Unix epoch, for `--now` defaults.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::parse_until;

    #[test]
    fn until_forms() {
        assert_eq!(parse_until("1700000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_until("1700000000.25"), Ok(1_700_000_000_250));
        assert_eq!(parse_until("1700000000.1239"), Ok(1_700_000_000_123));
        assert_eq!(parse_until("1700000000123ms"), Ok(1_700_000_000_123));
        assert_eq!(parse_until("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(parse_until("2023-11-14T23:13:20.5+01:00"), Ok(1_700_000_000_500));
        assert!(parse_until("1700000000000").unwrap_err().contains("1700000000000ms"));
        for bad in ["", "abc", "-5", "1.2.3", "12x", "ms", "2023-13-40T00:00:00Z"] {
            assert!(parse_until(bad).is_err(), "{bad}");
        }
    }
}
