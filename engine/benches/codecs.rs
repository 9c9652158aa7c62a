//! CRC-64 and LZF: our choices against the base crates, on the same bytes.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn sample(n: usize) -> Vec<u8> {
    // Text-like data with repeats, as RDB string values tend to be.
    let mut x: u32 = 1;
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        if x.is_multiple_of(3) && v.len() > 64 {
            let from = v.len() - 1 - (x as usize >> 8) % 64;
            let run = 4 + (x as usize >> 16) % 24;
            for k in 0..run {
                let b = v[from + k % (v.len() - from)];
                v.push(b);
            }
        } else {
            v.push(b"abcdefghij klmnop:0123456789"[(x >> 20) as usize % 28]);
        }
    }
    v.truncate(n);
    v
}

/// Random letters from a 64-symbol alphabet, as bench/aof_gen.py's values: LZF finds
/// little to reference, so compression mostly scans and gives up.
fn letters(n: usize) -> Vec<u8> {
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x >> 58) as usize]
        })
        .collect()
}

fn crc(c: &mut Criterion) {
    let data = sample(16 << 20);
    let mut g = c.benchmark_group("crc64");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("crc-fast (used)", |b| b.iter(|| ferrokv::format::crc::crc64(black_box(&data))));
    g.bench_function("crc64 crate", |b| b.iter(|| crc64::crc64(0, black_box(&data))));
    g.finish();
}

fn lzf(c: &mut Criterion) {
    let mut g = c.benchmark_group("lzf");
    for size in [256usize, 4096, 1 << 20] {
        let raw = sample(size);
        let comp = lzf::compress(&raw).expect("compressible");
        g.throughput(Throughput::Bytes(raw.len() as u64));
        g.bench_with_input(BenchmarkId::new("ferrokv decompress (used)", size), &comp, |b, comp| {
            let mut out = Vec::new();
            b.iter(|| ferrokv::format::lzf::decompress_into(black_box(comp), size, &mut out))
        });
        g.bench_with_input(BenchmarkId::new("ferrokv validate (verify)", size), &comp, |b, comp| {
            b.iter(|| ferrokv::format::lzf::validate(black_box(comp), size))
        });
        g.bench_with_input(BenchmarkId::new("lzf crate decompress", size), &comp, |b, comp| {
            b.iter(|| lzf::decompress(black_box(comp), size))
        });
    }
    g.finish();
    // Compression as RDB strings use it: room for the length less 4.
    let mut g = c.benchmark_group("lzf compress");
    for (kind, make) in [("text", sample as fn(usize) -> Vec<u8>), ("letters", letters)] {
        for size in [64usize, 300, 4096, 1 << 20] {
            let raw = make(size);
            g.throughput(Throughput::Bytes(raw.len() as u64));
            let id = format!("{kind}/{size}");
            g.bench_with_input(BenchmarkId::new("ferrokv (used)", &id), &raw, |b, raw| {
                b.iter(|| ferrokv::format::lzf::compress_with(black_box(raw), raw.len() - 4, |c| c.len()))
            });
            g.bench_with_input(BenchmarkId::new("lzf crate", &id), &raw, |b, raw| {
                b.iter(|| lzf::compress(black_box(raw)).map(|c| c.len()))
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = crc, lzf
}
criterion_main!(benches);
