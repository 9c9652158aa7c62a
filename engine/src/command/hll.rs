//! HyperLogLog (hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST over the
//! string Redis writes, byte for byte — a 16-byte header (`HYLL`, the encoding, the
//! cached cardinality) and 16,384 six-bit registers, either dense (packed, 12,304 bytes)
//! or sparse (runs of ZERO, XZERO and VAL opcodes, promoted to dense past
//! `hll-sparse-max-bytes` or a register above 32) — so a value made here reads the same in
//! Redis and back.

use super::{notify, Ctx, Reply, Spec};
use crate::value::{Str, Value};

pub const SPECS: &[Spec] = &[
    Spec::new("pfadd", pfadd),
    Spec::new("pfcount", pfcount),
    Spec::new("pfmerge", pfmerge),
    Spec::new("pfdebug", pfdebug),
    Spec::new("pfselftest", pfselftest),
];

/// Registers: 2^14, each counting up to 50 + 1 leading zeros of a 64-bit hash.
const P: u32 = 14;
const Q: u32 = 50;
const REGISTERS: usize = 1 << P;
const REGISTER_MAX: u8 = 63;
const HEADER: usize = 16;
const DENSE_SIZE: usize = HEADER + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;

const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// A register list or an opcode stream that does not add up to 16,384 registers.
#[derive(Debug)]
struct Corrupt;

/// MurmurHash64A as Redis has it (little-endian words), with its seed.
fn murmur64a(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const SEED: u64 = 0xadc8_3b19;
    let mut h = SEED ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> 47;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^= h >> 47;
    h
}

/// The register an element falls in and the count it brings (1 + trailing zeros of the
/// rest of its hash, at most Q + 1).
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ------------------------------------------------------------------ dense registers

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u16::from(regs[byte]);
    // The last register's second byte is past the registers (Redis reads the string's
    // terminator there).
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u16::from(REGISTER_MAX)) as u8
}

fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u16::from(v);
    let max = u16::from(REGISTER_MAX);
    regs[byte] = ((u16::from(regs[byte]) & !(max << fb)) | (v << fb)) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        let fb8 = 8 - fb;
        *next = ((u16::from(*next) & !(max >> fb8)) | (v >> fb8)) as u8;
    }
}

/// Raise register `i` to `count`: whether it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ------------------------------------------------------------------ sparse opcodes

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

/// One opcode at `p`: (registers it covers, its bytes, its value: 0 for a zero run).
fn opcode(b: &[u8], p: usize) -> (usize, usize, u8) {
    let op = b[p];
    if is_zero(op) {
        (usize::from(op & 0x3f) + 1, 1, 0)
    } else if is_xzero(op) {
        let low = b.get(p + 1).copied().unwrap_or(0);
        (((usize::from(op & 0x3f) << 8) | usize::from(low)) + 1, 2, 0)
    } else {
        (val_len(op), 1, val_value(op))
    }
}

/// A run of `len` zero registers as one opcode (ZERO up to 64, else XZERO).
fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        seq.extend([0x40 | (l >> 8) as u8, (l & 0xff) as u8]);
    } else {
        seq.push((len - 1) as u8);
    }
}

/// Every (register, value) run of a sparse HLL, checked to cover exactly the registers.
fn sparse_runs(b: &[u8]) -> Result<Vec<(usize, usize, u8)>, Corrupt> {
    let mut runs = Vec::new();
    let (mut p, mut idx) = (HEADER, 0usize);
    while p < b.len() {
        let (len, oplen, value) = opcode(b, p);
        if value > 0 && idx + len > REGISTERS {
            break;
        }
        runs.push((idx, len, value));
        idx += len;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(runs)
}

fn invalidate_cache(b: &mut [u8]) {
    b[15] |= 0x80;
}

/// An empty sparse HLL: the header and one XZERO run over every register.
fn new_sparse() -> Vec<u8> {
    let mut b = vec![0u8; HEADER];
    b[..4].copy_from_slice(b"HYLL");
    b[4] = SPARSE;
    for _ in 0..REGISTERS.div_ceil(SPARSE_XZERO_MAX_LEN) {
        push_zeros(&mut b, SPARSE_XZERO_MAX_LEN);
    }
    b
}

/// Whether `b` is an HLL Redis accepts (isHLLObjectOrReply).
fn is_hll(s: &Str) -> bool {
    if matches!(s, Str::Int(_)) {
        return false;
    }
    let b = s.as_bytes();
    b.len() >= HEADER && &b[..4] == b"HYLL" && b[4] <= SPARSE && (b[4] != DENSE || b.len() == DENSE_SIZE)
}

fn sparse_to_dense(b: &mut Vec<u8>) -> Result<(), Corrupt> {
    if b[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&b[..HEADER]);
    dense[4] = DENSE;
    for (start, len, value) in sparse_runs(b)? {
        if value > 0 {
            for i in start..start + len {
                dense_set(&mut dense[HEADER..], i, value);
            }
        }
    }
    *b = dense;
    Ok(())
}

/// Raise register `index` of a sparse HLL to `count`, as Redis's hllSparseSet rewrites the
/// opcodes (so the bytes are the same), promoting to dense when the value needs more than
/// the sparse form holds or the string would pass the sparse limit.
fn sparse_raise(b: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(b, index, count);
    }
    // The opcode covering `index`, the one before it, and the first register it covers.
    let (mut p, mut first, mut prev, mut span, mut oplen, mut value) = (HEADER, 0usize, None, 0usize, 1, 0u8);
    while p < b.len() {
        (span, oplen, value) = opcode(b, p);
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p + oplen > b.len() {
        return Err(Corrupt);
    }
    let val = is_val(b[p]);
    let runlen = span;
    let in_place = if val {
        if value >= count {
            return Ok(false);
        }
        runlen == 1
    } else {
        is_zero(b[p]) && runlen == 1
    };
    if in_place {
        b[p] = val_op(count, 1);
    } else {
        // Split the run: what comes before `index`, the new value, what comes after.
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if val {
            if index != first {
                seq.push(val_op(value, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(value, last - index));
            }
        } else {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        if seq.len() > oplen && b.len() + seq.len() - oplen > max_bytes {
            return promote(b, index, count);
        }
        b.splice(p..p + oplen, seq);
    }
    // Merge neighbouring VAL opcodes of one value, up to five opcodes from the one before.
    let mut q = prev.unwrap_or(HEADER);
    let mut scan = 5;
    while q < b.len() && scan > 0 {
        scan -= 1;
        if is_xzero(b[q]) {
            q += 2;
            continue;
        }
        if is_zero(b[q]) {
            q += 1;
            continue;
        }
        if q + 1 < b.len() && is_val(b[q + 1]) && val_value(b[q]) == val_value(b[q + 1]) {
            let len = val_len(b[q]) + val_len(b[q + 1]);
            if len <= SPARSE_VAL_MAX_LEN {
                b[q + 1] = val_op(val_value(b[q]), len);
                b.remove(q);
                continue;
            }
        }
        q += 1;
    }
    invalidate_cache(b);
    Ok(true)
}

fn promote(b: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(b)?;
    Ok(dense_raise(&mut b[HEADER..], index, count))
}

/// Add an element: whether a register changed.
fn add(b: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    if b[4] == DENSE {
        Ok(dense_raise(&mut b[HEADER..], index, count))
    } else {
        sparse_raise(b, index, count, max_bytes)
    }
}

/// Fold an HLL's registers into `max` (each the larger of the two).
fn merge_into(max: &mut [u8], b: &[u8]) -> Result<(), Corrupt> {
    if b[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&b[HEADER..], i));
        }
        return Ok(());
    }
    for (start, len, value) in sparse_runs(b)? {
        for m in &mut max[start..start + len] {
            *m = (*m).max(value);
        }
    }
    Ok(())
}

/// Redis's cardinality estimate (Ertl's improved estimator) from the registers' histogram.
fn estimate(histogram: &[u32; 64]) -> u64 {
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histogram[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality of an HLL string: its registers, counted as a merge of one.
fn count(b: &[u8]) -> Result<u64, Corrupt> {
    let mut registers = vec![0u8; REGISTERS];
    merge_into(&mut registers, b)?;
    Ok(count_registers(&registers))
}

/// The cardinality of plain registers.
fn count_registers(max: &[u8]) -> u64 {
    let mut histogram = [0u32; 64];
    for &r in max {
        histogram[usize::from(r.min(REGISTER_MAX))] += 1;
    }
    estimate(&histogram)
}

// ------------------------------------------------------------------ commands

/// `v` as an HLL for writing, unshared (made raw), or the error Redis gives for it.
fn as_hll(v: &mut Value) -> Result<&mut Vec<u8>, Reply> {
    match v {
        Value::Str(s) if is_hll(s) => Ok(s.make_raw()),
        Value::Str(_) => Err(Reply::err(NOT_HLL)),
        _ => Err(Reply::wrongtype()),
    }
}

/// The HLL at `key` for writing: Ok(None) when missing.
fn hll_mut<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c mut Vec<u8>>, Reply> {
    ctx.lookup_write(key).map(as_hll).transpose()
}

/// The HLL at `key` for writing, an empty one created when missing; whether it was.
fn hll_or_new<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<(&'c mut Vec<u8>, bool), Reply> {
    let mut created = false;
    let v = ctx.lookup_write_or_insert(key, || {
        created = true;
        Value::Str(Str::grown(new_sparse()))
    });
    as_hll(v).map(|b| (b, created))
}

fn pfadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[1];
    let max_bytes = ctx.cfg.limits.hll_sparse_max_bytes;
    let (b, created) = match hll_or_new(ctx, key) {
        Ok(found) => found,
        Err(e) => return e,
    };
    let mut updated = u64::from(created);
    for ele in &a[2..] {
        match add(b, ele, max_bytes) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(Corrupt) => return Reply::err(INVALID_HLL),
        }
    }
    if updated > 0 {
        invalidate_cache(b);
        ctx.signal_modified(key);
        ctx.notify(notify::STRING, "pfadd", key);
        ctx.dirty += updated;
    }
    Reply::Int(i64::from(updated > 0))
}

/// The registers of the HLLs at `keys` merged (missing keys count as empty), and whether
/// any of them is dense.
fn merged(ctx: &mut Ctx<'_>, keys: &[Vec<u8>]) -> Result<(Vec<u8>, bool), Reply> {
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for key in keys {
        match ctx.lookup_read(key) {
            None => continue,
            Some(Value::Str(s)) if is_hll(s) => {
                let b = s.as_bytes();
                dense |= b[4] == DENSE;
                merge_into(&mut max, &b).map_err(|_| Reply::err(INVALID_HLL))?;
            }
            Some(Value::Str(_)) => return Err(Reply::err(NOT_HLL)),
            Some(_) => return Err(Reply::wrongtype()),
        }
    }
    Ok((max, dense))
}

fn pfcount(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    if a.len() > 2 {
        return match merged(ctx, &a[1..]) {
            Ok((max, _)) => Reply::Int(count_registers(&max) as i64),
            Err(e) => e,
        };
    }
    let key = &a[1];
    // Looked up for reading, as Redis does: a replica keeps a logically expired key.
    let b = match ctx.lookup_read(key).map(as_hll).transpose() {
        Err(e) => return e,
        Ok(None) => return Reply::Int(0),
        Ok(Some(b)) => b,
    };
    if b[15] & 0x80 == 0 {
        let mut card = [0u8; 8];
        card.copy_from_slice(&b[8..16]);
        return Reply::Int(u64::from_le_bytes(card) as i64);
    }
    let Ok(card) = count(b) else { return Reply::err(INVALID_HLL) };
    // Cache it: the key changed, and PFCOUNT goes to the AOF and the replicas.
    b[8..16].copy_from_slice(&card.to_le_bytes());
    ctx.signal_modified(key);
    ctx.dirty += 1;
    Reply::Int(card as i64)
}

fn pfmerge(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (max, dense) = match merged(ctx, &a[1..]) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let dest = &a[1];
    let max_bytes = ctx.cfg.limits.hll_sparse_max_bytes;
    let b = match hll_or_new(ctx, dest) {
        Ok((b, _)) => b,
        Err(e) => return e,
    };
    if dense && sparse_to_dense(b).is_err() {
        return Reply::err(INVALID_HLL);
    }
    for (i, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        let raised =
            if b[4] == DENSE { Ok(dense_raise(&mut b[HEADER..], i, m)) } else { sparse_raise(b, i, m, max_bytes) };
        if raised.is_err() {
            return Reply::err(INVALID_HLL);
        }
    }
    invalidate_cache(b);
    ctx.signal_modified(dest);
    ctx.notify(notify::STRING, "pfadd", dest);
    ctx.dirty += 1;
    Reply::ok()
}

fn pfdebug(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let sub = a[1].to_ascii_lowercase();
    let key = &a[2];
    let b = match hll_mut(ctx, key) {
        Err(e) => return e,
        Ok(None) => return Reply::err("ERR The specified key does not exist"),
        Ok(Some(b)) => b,
    };
    match sub.as_slice() {
        b"getreg" => {
            let converted = b[4] == SPARSE;
            if sparse_to_dense(b).is_err() {
                return Reply::err(INVALID_HLL);
            }
            let regs: Vec<Reply> = (0..REGISTERS).map(|i| Reply::Int(i64::from(dense_get(&b[HEADER..], i)))).collect();
            if converted {
                ctx.dirty += 1;
            }
            Reply::Array(regs)
        }
        b"decode" => {
            if b[4] != SPARSE {
                return Reply::err("ERR HLL encoding is not sparse");
            }
            let mut words = Vec::new();
            let mut p = HEADER;
            while p < b.len() {
                let (len, oplen, value) = opcode(b, p);
                words.push(match (value, oplen) {
                    (0, 1) => format!("z:{len}"),
                    (0, _) => format!("Z:{len}"),
                    (v, _) => format!("v:{v},{len}"),
                });
                p += oplen;
            }
            Reply::Bulk(words.join(" ").into_bytes())
        }
        b"encoding" => Reply::simple(if b[4] == DENSE { "dense" } else { "sparse" }),
        b"todense" => {
            let converted = b[4] == SPARSE;
            if sparse_to_dense(b).is_err() {
                return Reply::err(INVALID_HLL);
            }
            if converted {
                ctx.dirty += 1;
            }
            Reply::Int(i64::from(converted))
        }
        _ => Reply::error(format!("ERR Unknown PFDEBUG subcommand '{}'", super::err_arg(&a[1], usize::MAX))),
    }
}

/// Checks of this implementation's own parts (Redis's runs its own): register packing
/// over every register, and the sparse and dense forms agreeing on the same elements.
fn pfselftest(_: &mut Ctx<'_>, _: &[Vec<u8>]) -> Reply {
    let mut regs = vec![0u8; DENSE_SIZE - HEADER];
    for i in 0..REGISTERS {
        dense_set(&mut regs, i, (i % 64) as u8);
    }
    if (0..REGISTERS).any(|i| dense_get(&regs, i) != (i % 64) as u8) {
        return Reply::err("ERR TESTFAILED Register error");
    }
    let (mut sparse, mut dense) = (new_sparse(), new_sparse());
    if sparse_to_dense(&mut dense).is_err() {
        return Reply::err("ERR TESTFAILED Sparse to dense conversion failed");
    }
    for i in 0..5000u32 {
        let ele = i.to_le_bytes();
        if add(&mut sparse, &ele, 3000).is_err() || add(&mut dense, &ele, 3000).is_err() {
            return Reply::err(INVALID_HLL);
        }
    }
    match (count(&sparse), count(&dense)) {
        (Ok(s), Ok(d)) if s == d && s.abs_diff(5000) < 5000 * 3 / 100 => Reply::ok(),
        _ => Reply::err("ERR TESTFAILED Sparse and dense counts differ"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_hll_is_two_xzero_bytes() {
        let b = new_sparse();
        assert_eq!(b.len(), 18);
        assert_eq!(&b[16..], &[0x7f, 0xff]);
        assert_eq!(count(&b).ok(), Some(0));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let (mut s, mut d) = (new_sparse(), new_sparse());
        assert!(sparse_to_dense(&mut d).is_ok());
        for i in 0..20_000u32 {
            assert!(add(&mut s, format!("e{i}").as_bytes(), 3000).is_ok());
            assert!(add(&mut d, format!("e{i}").as_bytes(), 3000).is_ok());
        }
        assert_eq!(s[4], DENSE, "promoted past 3000 bytes");
        // The registers; the headers differ only in the cache flag (PFADD sets it).
        assert!(s[HEADER..] == d[HEADER..]);
    }

    /// Damaged sparse strings (any opcode bytes after a valid header) are refused or
    /// counted, never a panic, through every path that reads them.
    #[test]
    fn damaged_strings_never_panic() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = new_sparse();
            b.truncate(HEADER);
            let n = (seed % 12) as usize + (round % 3);
            for i in 0..n {
                b.push((seed >> (i * 5 % 59)) as u8);
            }
            let _ = count(&b);
            let _ = merge_into(&mut vec![0u8; REGISTERS], &b);
            let _ = add(&mut b.clone(), &round.to_le_bytes(), 3000);
            let _ = sparse_raise(&mut b.clone(), (seed % REGISTERS as u64) as usize, (seed % 40) as u8 + 1, 3000);
            let _ = sparse_to_dense(&mut b);
        }
    }
}
