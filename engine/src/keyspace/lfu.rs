//! Redis's LFU data in a key's 24-bit `lru` field, for the LFU maxmemory policies: the
//! last decrement time in minutes (16 bits) and a logarithmic access counter (8 bits).

use crate::config::Config;

/// A new key's counter (Redis's LFU_INIT_VAL), so it is not evicted at once.
pub const LFU_INIT_VAL: u32 = 5;

fn minutes(now_ms: i64) -> u32 {
    ((now_ms.div_euclid(1000) / 60) as u32) & 0xFFFF
}

/// The field of a key created now.
pub fn init(now_ms: i64) -> u32 {
    (minutes(now_ms) << 8) | LFU_INIT_VAL
}

/// The field with `counter` as of now (RESTORE ... FREQ).
pub fn with_counter(now_ms: i64, counter: u8) -> u32 {
    (minutes(now_ms) << 8) | u32::from(counter)
}

/// The counter after the decay due since the last decrement (OBJECT FREQ).
pub fn counter(field: u32, now_ms: i64, decay_time: u32) -> u32 {
    let last = (field >> 8) & 0xFFFF;
    let count = field & 0xFF;
    let now = minutes(now_ms);
    let elapsed = if now >= last { now - last } else { 65535 - last + now };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    count.saturating_sub(periods)
}

/// An access: decay, then a logarithmic increment (likelier the smaller the counter).
pub fn touch(field: u32, now_ms: i64, cfg: &Config, rng: &mut fastrand::Rng) -> u32 {
    let mut c = counter(field, now_ms, cfg.lfu_decay_time);
    if c < 255 {
        let base = f64::from(c.saturating_sub(LFU_INIT_VAL));
        let p = 1.0 / (base * f64::from(cfg.lfu_log_factor) + 1.0);
        if rng.f64() < p {
            c += 1;
        }
    }
    (minutes(now_ms) << 8) | c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_up_logarithmically_and_decays_per_minute() {
        let cfg = Config::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let t = 1_700_000_000_000;
        let mut f = init(t);
        assert_eq!(counter(f, t, 1), 5);
        for _ in 0..100 {
            f = touch(f, t, &cfg, &mut rng);
        }
        let c = counter(f, t, 1);
        assert!((8..30).contains(&c), "{c}");
        assert_eq!(counter(f, t + 3 * 60_000, 1), c - 3);
        assert_eq!(counter(f, t + 3 * 60_000, 0), c);
        assert_eq!(counter(with_counter(t, 100), t, 1), 100);
    }
}
