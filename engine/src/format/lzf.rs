//! LZF decompression with the checks RDB needs.
//!
//! The RDB stores both lengths, so the output must be exactly `original_len` bytes. A
//! corrupt `original_len` must not make us allocate gigabytes: LZF expands at most about
//! 88x (a 3-byte back-reference yields 264 bytes), so larger claims are rejected first.

/// Largest ratio of decompressed to compressed size that liblzf can produce.
const MAX_EXPANSION: usize = 88;

/// Why LZF decompression failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LzfError {
    Empty,
    ImplausibleLength { compressed: usize, original: usize },
    Corrupt,
    WrongLength { expected: usize },
}

impl std::fmt::Display for LzfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LzfError::Empty => write!(f, "empty LZF data"),
            LzfError::ImplausibleLength { compressed, original } => write!(
                f,
                "LZF string claims {original} bytes from {compressed} compressed bytes, more than LZF can expand"
            ),
            LzfError::Corrupt => write!(f, "corrupt LZF data"),
            LzfError::WrongLength { expected } => {
                write!(f, "LZF data does not decompress to the stated {expected} bytes")
            }
        }
    }
}

pub fn decompress(data: &[u8], original_len: usize) -> Result<Vec<u8>, LzfError> {
    let mut out = Vec::new();
    decompress_into(data, original_len, &mut out)?;
    Ok(out)
}

/// Where a decoded LZF stream goes: into a buffer, or only counted.
trait Sink {
    fn len(&self) -> usize;
    /// The first `run` bytes of `from`, which may go on past them.
    fn literal(&mut self, from: &[u8], run: usize);
    /// Copy `len` bytes starting `back` bytes before the end (`back <= self.len()`).
    fn back_ref(&mut self, back: usize, len: usize);
}

/// Counts bytes without producing them: validation only.
struct Count(usize);

impl Sink for Count {
    fn len(&self) -> usize {
        self.0
    }
    fn literal(&mut self, _: &[u8], run: usize) {
        self.0 += run;
    }
    fn back_ref(&mut self, _: usize, len: usize) {
        self.0 += len;
    }
}

/// How many bytes [`Fill`] copies at a time where it has room.
const CHUNK: usize = 32;
/// The step of a back-reference closer than CHUNK bytes.
const WORD: usize = 8;

/// Writes into an output already sized to the original length (the walk checks that every
/// write fits). Short literal runs and back-references are copied CHUNK bytes at a time
/// where both sides have room: the bytes past a copy's end are written over by what
/// follows, and a copy never calls out to memcpy for a few bytes.
struct Fill<'o> {
    out: &'o mut [u8],
    op: usize,
}

impl Sink for Fill<'_> {
    fn len(&self) -> usize {
        self.op
    }
    fn literal(&mut self, from: &[u8], run: usize) {
        let op = self.op;
        if from.len() >= CHUNK && op + CHUNK <= self.out.len() {
            self.out[op..op + CHUNK].copy_from_slice(&from[..CHUNK]);
        } else {
            self.out[op..op + run].copy_from_slice(&from[..run]);
        }
        self.op += run;
    }
    // Inlined into the walk: most references copy a few bytes, less than a call costs.
    #[inline(always)]
    fn back_ref(&mut self, back: usize, len: usize) {
        let (op, out) = (self.op, &mut *self.out);
        let from = op - back;
        if back >= CHUNK && op + len.next_multiple_of(CHUNK) <= out.len() {
            // Each chunk reads bytes already final: they end `back` >= CHUNK bytes
            // before the chunk being written.
            let mut chunk = [0u8; CHUNK];
            for k in (0..len).step_by(CHUNK) {
                chunk.copy_from_slice(&out[from + k..from + k + CHUNK]);
                out[op + k..op + k + CHUNK].copy_from_slice(&chunk);
            }
        } else if back >= WORD && op + len.next_multiple_of(WORD) <= out.len() {
            // The same a word at a time, for references closer than a chunk.
            for k in (0..len).step_by(WORD) {
                let mut word = [0u8; WORD];
                word.copy_from_slice(&out[from + k..from + k + WORD]);
                out[op + k..op + k + WORD].copy_from_slice(&word);
            }
        } else if back >= len {
            out.copy_within(from..from + len, op);
        } else {
            // Overlapping: the run repeats with period `back`.
            for k in 0..len {
                out[op + k] = out[from + k];
            }
        }
        self.op += len;
    }
}

/// Walk an LZF stream into `out`, checking every bound on the way.
fn run<S: Sink>(data: &[u8], original_len: usize, out: &mut S) -> Result<(), LzfError> {
    if data.is_empty() {
        return Err(LzfError::Empty);
    }
    if original_len > data.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImplausibleLength { compressed: data.len(), original: original_len });
    }
    let too_long = LzfError::WrongLength { expected: original_len };
    let mut i = 0;
    while i < data.len() {
        let ctrl = data[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if i + run > data.len() {
                return Err(LzfError::Corrupt);
            }
            if out.len() + run > original_len {
                return Err(too_long);
            }
            out.literal(&data[i..], run);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&extra) = data.get(i) else { return Err(LzfError::Corrupt) };
                len += extra as usize;
                i += 1;
            }
            let Some(&low) = data.get(i) else { return Err(LzfError::Corrupt) };
            i += 1;
            let back = ((ctrl & 0x1F) << 8) + low as usize + 1;
            let len = len + 2;
            if back > out.len() {
                return Err(LzfError::Corrupt);
            }
            if out.len() + len > original_len {
                return Err(too_long);
            }
            out.back_ref(back, len);
        }
    }
    if out.len() != original_len {
        return Err(too_long);
    }
    Ok(())
}

/// Check that `data` is a well-formed LZF stream producing exactly `original_len` bytes,
/// without producing them (every bound is checked as in decompression). Used by verify.
pub fn validate(data: &[u8], original_len: usize) -> Result<(), LzfError> {
    run(data, original_len, &mut Count(0))
}

/// Decompress into `out` (what it held is overwritten), so callers can reuse one buffer.
///
/// Written here rather than calling the `lzf` crate: it reuses the caller's buffer (no
/// allocation per string, and no zeroing of the bytes it already holds: every byte up to
/// `original_len` is written before a successful return) and sizes it once, then copies
/// in blocks ([`Fill`]); `benches/codecs.rs` compares both, and the tests check they give
/// the same bytes.
pub fn decompress_into(data: &[u8], original_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    // An implausible length is refused by the walk before anything is written.
    if original_len <= data.len().saturating_mul(MAX_EXPANSION) {
        out.resize(original_len, 0);
    } else {
        out.clear();
    }
    let r = run(data, original_len, &mut Fill { out, op: 0 });
    if r.is_err() {
        out.clear();
    }
    r
}

/// Slots in the compressor's hash table: 2^16, as Redis builds liblzf (HLOG 16).
const HSIZE: usize = 1 << 16;
/// Back-references reach at most 8 KiB behind and cover at most 264 bytes.
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = 264;
/// Literal runs hold at most 32 bytes behind their length byte.
const MAX_LIT: usize = 32;

/// The compressor's reusable state: the hash table and an output buffer, kept per thread
/// so compressing a short string costs neither an allocation nor a 256 KB memset.
struct Compressor {
    /// Input positions, stored as `base + position`. Entries not above `base` were left
    /// by earlier inputs and read as empty, so every call sees a fresh table.
    slots: Box<[u32; HSIZE]>,
    base: u32,
    out: Vec<u8>,
}

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Compressor> = std::cell::RefCell::new(Compressor::new());
}

/// liblzf's slot for the three bytes ending `h`'s low 24 bits (VERY_FAST hashing; only
/// the low 16 bits of each term matter, so older bytes rolled into `h` do not).
#[inline(always)]
fn slot(h: u32) -> usize {
    ((h >> 8).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// How many leading bytes `a` and `b` (same length) share, eight at a time.
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut k = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let (Ok(x), Ok(y)) = (<[u8; 8]>::try_from(x), <[u8; 8]>::try_from(y)) else { break };
        let diff = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if diff != 0 {
            return k + (diff.trailing_zeros() / 8) as usize;
        }
        k += 8;
    }
    k + a[k..].iter().zip(&b[k..]).take_while(|(x, y)| x == y).count()
}

/// One more literal byte; a run that reaches 32 bytes is closed and a new one started.
#[inline(always)]
fn push_literal(out: &mut [u8], op: &mut usize, lit: &mut usize, b: u8) {
    out[*op] = b;
    *op += 1;
    *lit += 1;
    if *lit == MAX_LIT {
        out[*op - MAX_LIT - 1] = (MAX_LIT - 1) as u8;
        *lit = 0;
        *op += 1;
    }
}

impl Compressor {
    fn new() -> Compressor {
        let slots = match vec![0u32; HSIZE].into_boxed_slice().try_into() {
            Ok(s) => s,
            Err(_) => unreachable!("the vector has HSIZE slots"),
        };
        Compressor { slots, base: 0, out: Vec::new() }
    }

    /// liblzf's `lzf_compress` into `self.out` with room for `max_out` bytes: the same
    /// matches, the same literal runs, and the same points where it gives up, so a string
    /// is compressed exactly when Redis compresses it, to the bytes Redis writes from a
    /// clean table. Returns the compressed length.
    fn compress(&mut self, input: &[u8], max_out: usize) -> Option<usize> {
        let n = input.len();
        if n == 0 || max_out == 0 || n >= 1 << 31 {
            return None;
        }
        if u64::from(self.base) + n as u64 >= u64::from(u32::MAX) {
            self.slots.fill(0);
            self.base = 0;
        }
        let base = self.base;
        self.base += n as u32;
        if self.out.len() < max_out + 4 {
            self.out.resize(max_out + 4, 0);
        }
        let (slots, out) = (&mut self.slots, &mut self.out[..]);
        // `op` is where the next byte goes; every run starts with a reserved length byte.
        let (mut op, mut lit, mut i) = (1usize, 0usize, 0usize);
        let mut h = if n >= 2 { u32::from(input[0]) << 8 | u32::from(input[1]) } else { 0 };
        while i + 2 < n {
            h = h << 8 | u32::from(input[i + 2]);
            let s = slot(h);
            let stored = slots[s];
            slots[s] = base + i as u32;
            // Position 0 is never referenced (liblzf tests `ref > in_data`).
            let r = stored.wrapping_sub(base) as usize;
            let found = stored > base && i - r - 1 < MAX_OFF && input[r..r + 3] == input[i..i + 3];
            if !found {
                if op >= max_out {
                    return None;
                }
                push_literal(out, &mut op, &mut lit, input[i]);
                i += 1;
                continue;
            }
            let off = i - r - 1;
            let maxlen = (n - i - 2).min(MAX_REF);
            // liblzf compares 16 bytes unchecked when more than 16 may match, so a match
            // can end up to two bytes past `maxlen` there; lengths follow it exactly.
            let limit = if maxlen > 16 { maxlen.max(19) } else { maxlen };
            // Three bytes match; liblzf counts them even when fewer than three remain
            // after the first two (a match can reach the input's last byte).
            let m = if limit > 3 { 3 + common_prefix(&input[r + 3..r + limit], &input[i + 3..i + limit]) } else { 3 };
            let len = if maxlen <= 16 || m <= 18 { m } else { m.min(maxlen).max(19) };
            if lit > 0 {
                out[op - lit - 1] = (lit - 1) as u8;
            } else {
                op -= 1;
            }
            if op + 4 >= max_out {
                return None;
            }
            let l = len - 2;
            if l < 7 {
                out[op] = ((off >> 8) + (l << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (l - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 2;
            lit = 0;
            i += len;
            if i + 2 >= n {
                break;
            }
            // Index the match's last two positions only (liblzf's VERY_FAST).
            h = u32::from(input[i - 2]) << 16 | u32::from(input[i - 1]) << 8 | u32::from(input[i]);
            slots[slot(h)] = base + (i - 2) as u32;
            h = h << 8 | u32::from(input[i + 1]);
            slots[slot(h)] = base + (i - 1) as u32;
        }
        if op + 3 > max_out {
            return None;
        }
        for &b in &input[i..] {
            push_literal(out, &mut op, &mut lit, b);
        }
        if lit > 0 {
            out[op - lit - 1] = (lit - 1) as u8;
        } else {
            op -= 1;
        }
        Some(op)
    }
}

/// Compress `input` as Redis's liblzf does, or `None` when the output would not fit in
/// `max_out` bytes (Redis passes the length less 4). Written here because the `lzf`
/// crate's compressor panics on some inputs (an index out of bounds in lzf 1.0.0, met on
/// real Redis data) and allocates a table per call.
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    compress_with(input, max_out, <[u8]>::to_vec)
}

/// [`compress`], handing the compressed bytes to `f` from a per-thread buffer instead of
/// allocating them.
pub fn compress_with<R>(input: &[u8], max_out: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        let len = c.compress(input, max_out)?;
        Some(f(&c.out[..len]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_checks() {
        let text = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabcabcabc";
        let c = lzf::compress(text).unwrap();
        assert_eq!(decompress(&c, text.len()).unwrap(), text.to_vec());
        assert!(decompress(&c, text.len() + 1).is_err());
        assert!(decompress(&c, text.len() - 1).is_err());
        assert!(matches!(decompress(&c, usize::MAX / 2), Err(LzfError::ImplausibleLength { .. })));
        assert_eq!(decompress(&[], 3), Err(LzfError::Empty));
    }

    #[test]
    fn compressor_round_trips_through_both_decoders() {
        let mut x: u32 = 99;
        let mut cases: Vec<Vec<u8>> =
            vec![b"a".to_vec(), b"abc".to_vec(), vec![0; 100_000], b"abcabcabcabcabcabcabcabc".to_vec()];
        for size in [10usize, 100, 1000, 40_000] {
            let mut v = Vec::new();
            while v.len() < size {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                if x.is_multiple_of(5) && v.len() > 10 {
                    let from = v.len() - 1 - (x >> 8) as usize % v.len().min(9000);
                    let run = 3 + (x >> 20) as usize % 300;
                    for k in 0..run {
                        let b = v[from + k % (v.len() - from)];
                        v.push(b);
                    }
                } else {
                    v.push((x >> 24) as u8 % 7 + b'a');
                }
            }
            cases.push(v);
        }
        for c in &cases {
            let comp = compress(c, c.len() + c.len() / 32 + 8).unwrap();
            assert_eq!(decompress(&comp, c.len()).unwrap(), *c);
            assert_eq!(::lzf::decompress(&comp, c.len()).unwrap(), *c);
            // A tight budget is refused, not overrun.
            if comp.len() > 1 {
                assert!(compress(c, comp.len() - 1).is_none_or(|v| v.len() < comp.len()));
            }
        }
    }

    #[test]
    fn agrees_with_the_reference_crate() {
        // Text with long and short repeats, overlapping back-references, binary noise.
        let mut x: u32 = 7;
        let mut data = Vec::new();
        for i in 0..50_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            match i % 7 {
                0 => data.extend_from_slice(b"hello hello hello "),
                1 => data.push((x >> 16) as u8),
                2 => data.extend(std::iter::repeat_n(b'z', (x % 300) as usize)),
                _ => {
                    let n = data.len();
                    data.extend_from_within(n.saturating_sub(40)..);
                }
            }
        }
        let c = ::lzf::compress(&data).unwrap();
        assert_eq!(decompress(&c, data.len()).unwrap(), data);
        assert_eq!(validate(&c, data.len()), Ok(()));
        assert!(validate(&c, data.len() + 1).is_err());
        assert_eq!(::lzf::decompress(&c, data.len()).unwrap(), data);
        // Damaged streams: decompression and validation give the same verdict, and what
        // decompresses is what the reference decompresses.
        let (mut same, mut refused) = (0, 0);
        let part = &data[..4000];
        let pc = ::lzf::compress(part).unwrap();
        // A reused buffer, left holding other bytes (longer, then shorter, than the output).
        let mut reused = vec![0xA5u8; 5000];
        for at in 0..pc.len() {
            for flip in [0x01u8, 0x20, 0xE0] {
                let mut d = pc.clone();
                d[at] ^= flip;
                let ours = decompress(&d, part.len());
                assert_eq!(ours.clone().map(|_| ()), validate(&d, part.len()), "byte {at} ^ {flip:#x}");
                reused.resize(if at % 2 == 0 { 5000 } else { 100 }, 0x5A);
                let again = decompress_into(&d, part.len(), &mut reused).map(|()| reused.clone());
                assert_eq!(again.ok(), ours.clone().ok(), "reused buffer: byte {at} ^ {flip:#x}");
                match ours {
                    Ok(v) => {
                        assert_eq!(Ok(v), ::lzf::decompress(&d, part.len()).map_err(|_| ()), "byte {at} ^ {flip:#x}");
                        same += 1;
                    }
                    Err(_) => refused += 1,
                }
            }
        }
        assert!(same > 100 && refused > 100, "same {same}, refused {refused}");
        // Every truncation fails without panicking.
        for cut in [0, 1, 2, c.len() / 2, c.len() - 1] {
            assert!(decompress(&c[..cut], data.len()).is_err());
            assert!(validate(&c[..cut], data.len()).is_err());
        }
    }
}
