#!/usr/bin/env bash
# make bench: rdbtool against redis-check-rdb on the same machine, in one run, on an RDB of
# >= 1 GB written by a real redis-server (generated here, never committed). Writes
# docs/benchmarks.md. Then the criterion micro-benchmarks (CRC, LZF).
#
#   BENCH_DIR   where the big RDB lives (default /tmp/ferrokv-bench)
#   BENCH_MB    its minimum size in MB (default 1100)
#   BENCH_RUNS  timed runs per command; the best is reported (default 3)
#   BENCH_AOF_MB  RESP per phase of the >= 2 GB AOF of bench/aof.sh (default 1100)
#   BENCH_N, BENCH_ROUNDS  redis-benchmark requests per test and rounds (bench/server.sh)
#   BENCH_RESTORE_KEYS, BENCH_MIXED_KEYS  the restore datasets' sizes (bench/restore.sh)
#   HDT_RDB     HDT3213/rdb's binary (`go build` in a snapshot of github.com/HDT3213/rdb),
#               timed beside rdbtool memory when set
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/ferrokv-bench}
BENCH_MB=${BENCH_MB:-1100}
RUNS=${BENCH_RUNS:-3}
RDB="$BENCH_DIR/big.rdb"
TOOL=target/release/rdbtool
mkdir -p "$BENCH_DIR"

if [ ! -s "$RDB" ] || [ "$(stat -c %s "$RDB")" -lt $((BENCH_MB * 1000000)) ]; then
    echo "generating $RDB (>= $BENCH_MB MB) with a real redis-server ..." >&2
    python3 fixtures/generate.py --bench "$RDB" --size-mb "$BENCH_MB"
fi
cargo build --release --bins -q
SIZE=$(stat -c %s "$RDB")
cat "$RDB" > /dev/null   # warm the page cache: every tool reads the same cached file

. bench/lib.sh

echo "timing (best of $RUNS) on $RDB ($SIZE bytes)" >&2
CHECK=$(best_of "$RUNS" redis-check-rdb "$RDB")
VERIFY=$(best_of "$RUNS" "$TOOL" verify "$RDB")
VERIFY1=$(best_of "$RUNS" env FERROKV_THREADS=1 "$TOOL" verify "$RDB")
DUMP=$(best_of "$RUNS" "$TOOL" dump "$RDB")
DUMP1=$(best_of "$RUNS" env FERROKV_THREADS=1 "$TOOL" dump "$RDB")
RESP=$(best_of "$RUNS" "$TOOL" dump --format resp "$RDB")
INFO=$(best_of "$RUNS" "$TOOL" info "$RDB")
ENC_OUT="$BENCH_DIR/reencoded-7.0.rdb"
ENCODE=$(best_of "$RUNS" "$TOOL" convert "$RDB" "$ENC_OUT" --to rdb:redis-7.0)
ENCODE_CHECK=$(redis-check-rdb "$ENC_OUT" 2>&1 | grep -c "RDB looks OK" || true)
DIFF_REPORT=$(./bench/diff.sh 2>&1 | tail -12)
DIFF_LINE=$(echo "$DIFF_REPORT" | grep '^rdbtool diff' | sed -E 's/.*exit [0-9]+, //')
DIFF_SECS=${DIFF_LINE%% s *}
DIFF_KB=$(echo "$DIFF_LINE" | awk '{print $3}')
PARQUET=$(best_of "$RUNS" "$TOOL" convert "$RDB" "$BENCH_DIR/parquet" --to parquet)
MEMORY=$(best_of "$RUNS" "$TOOL" memory --format json "$RDB")
MEMORY_LINES=$(best_of "$RUNS" "$TOOL" memory --format jsonl "$RDB")
HDT=""
if [ -n "${HDT_RDB:-}" ] && [ -x "$HDT_RDB" ]; then
    HDT=$(best_of "$RUNS" "$HDT_RDB" -c memory -o "$BENCH_DIR/hdt-memory.csv" "$RDB")
fi
KEYS=$("$TOOL" info --json "$RDB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"])')
OUTSZ=$("$TOOL" dump "$RDB" | wc -c)

row() { # name, "secs rss", note
    local t=${2%% *} r=${2##* }
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$t" "$(mbps "$t")" "$(mib "$r")" "$3"
}
ct=${CHECK%% *}
ratio() { awk -v a="$ct" -v b="${1%% *}" 'BEGIN{printf "%.1fx", a/b}'; }

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
cat <<HDR
# Benchmarks

Produced by \`make bench\` (bench/run.sh) on $(date -u +%Y-%m-%d). Each command ran $RUNS times on a
warm page cache; the fastest run is reported. Peak RSS is \`/usr/bin/time\`'s maximum resident set.

- Machine: $(nproc) cores ($CPU), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr).
- Input: \`$RDB\`, $SIZE bytes, $KEYS keys, written by $(redis-server --version | cut -d' ' -f1-3) from
  \`python3 fixtures/generate.py --bench $RDB --size-mb $BENCH_MB\` (mixed types, see fixtures/README.md).
- Reference: $(redis-check-rdb --version 2>/dev/null | head -1) on the same file in the same run.

## rdbtool vs redis-check-rdb

| command | seconds | MB/s of input | peak RSS MiB | note |
|---|---:|---:|---:|---|
HDR
row "redis-check-rdb $RDB" "$CHECK" "reference"
row "rdbtool verify" "$VERIFY" "$(ratio "$VERIFY") redis-check-rdb (target >= 7x)"
row "rdbtool verify, 1 thread" "$VERIFY1" "$(ratio "$VERIFY1") redis-check-rdb"
row "rdbtool dump (jsonl) > /dev/null" "$DUMP" "target >= 300 MB/s; $OUTSZ bytes of output"
row "rdbtool dump (jsonl), 1 thread" "$DUMP1" ""
row "rdbtool dump --format resp" "$RESP" ""
row "rdbtool info" "$INFO" "structure only, CRC checked"
row "rdbtool diff big.rdb big-changed.rdb (1% of keys changed)" "$DIFF_SECS $DIFF_KB" "target <= 10 s, <= 512 MiB; counts checked below"
row "rdbtool convert --to rdb:redis-7.0" "$ENCODE" "decode + encode on every core; redis-check-rdb on the output: $([ "$ENCODE_CHECK" -gt 0 ] && echo OK || echo FAILED)"
row "rdbtool convert --to parquet (keys.parquet, elements.parquet)" "$PARQUET" "one core; zstd"
row "rdbtool memory --format json (the report)" "$MEMORY" "target >= 500 MB/s (issue #17)"
row "rdbtool memory --format jsonl (a line per key)" "$MEMORY_LINES" ""
if [ -n "$HDT" ]; then
    row "HDT3213/rdb -c memory (a CSV line per key)" "$HDT" "reference, same run (\$HDT_RDB)"
else
    echo "| HDT3213/rdb -c memory | | | | not timed: set HDT_RDB to its binary |"
fi
echo
echo "diff against the changes made (bench/diff.sh; big-changed.rdb made by fixtures/diff/mutate.py through a real redis-server):"
echo
echo '```'
echo "$DIFF_REPORT"
echo '```'
cat <<'TAIL'

Targets (issue #2): verify >= 7x redis-check-rdb's throughput, dump jsonl >= 300 MB/s of input,
peak RSS <= 64 MiB. How: the main thread walks record boundaries and hands ~1 MiB batches to
a worker per core (tools/src/pipeline.rs); verify checks LZF streams without decompressing them;
JSON escaping scans 8 bytes at a time; the CRC is fed as records are read and mapped pages
behind the written output are released, so RSS stays flat whatever the file size.
TAIL
} > docs/benchmarks.md.new

echo "criterion micro-benchmarks ..." >&2
cargo bench -q -p ferrokv --bench codecs -- --noplot 2>/dev/null | grep -E "^(crc|lzf)|time:|thrpt:" | grep -v "%" > "$BENCH_DIR/criterion.txt" || true
{
    echo
    echo '## Codecs (criterion, `cargo bench -p ferrokv --bench codecs`)'
    echo
    echo 'Why the base crates `crc64` and `lzf` are not on the hot path: same inputs, same run.'
    echo
    echo '```'
    cat "$BENCH_DIR/criterion.txt"
    echo '```'
} >> docs/benchmarks.md.new
echo "engine benchmarks ..." >&2
./bench/engine.sh "$RDB" >> docs/benchmarks.md.new
echo "AOF benchmarks ..." >&2
BENCH_DIR="$BENCH_DIR" BENCH_RUNS="$RUNS" ./bench/aof.sh >> docs/benchmarks.md.new
echo "server benchmarks ..." >&2
./bench/server.sh >> docs/benchmarks.md.new
echo "restore benchmarks ..." >&2
BENCH_DIR="$BENCH_DIR" BENCH_RUNS="$RUNS" ./bench/restore.sh >> docs/benchmarks.md.new
cat bench/analysis.md >> docs/benchmarks.md.new
mv docs/benchmarks.md.new docs/benchmarks.md
cat docs/benchmarks.md
