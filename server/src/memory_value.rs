//! Memory amounts as Redis's configuration writes them (`64mb`, `1g`).

/// Parse a memory value as Redis's memtoull: digits (none is 0; too many saturate, as
/// strtoull does) and an optional unit, no sign. The product wraps as C's unsigned
/// arithmetic does, and its bits are returned as an i64 (Redis stores it in a long long).
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let split = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if num.len() >= 128 {
        return None;
    }
    let n: u64 = if num.is_empty() { 0 } else { num.parse().unwrap_or(u64::MAX) };
    Some(n.wrapping_mul(mul) as i64)
}
