#!/usr/bin/env bash
# make bench: rdbtool against redis-check-rdb on the same machine, in one run, on two RDBs of
# >= 1 GB written by a real redis-server (generated here, never committed): big.rdb (mixed,
# fewer and larger keys) and small-keys.rdb (millions of small keys). Writes
# docs/benchmarks.md. Then the criterion micro-benchmarks (CRC, LZF) and the other sections.
#
#   BENCH_DIR   where the RDBs live (default /tmp/ferrokv-bench)
#   BENCH_MB    their minimum size in MB (default 1100)
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
SMALL="$BENCH_DIR/small-keys.rdb"
TOOL=target/release/rdbtool
mkdir -p "$BENCH_DIR"

# generate FILE SHAPE: an RDB of >= BENCH_MB MB written by a real redis-server.
generate() {
    if [ ! -s "$1" ] || [ "$(stat -c %s "$1")" -lt $((BENCH_MB * 1000000)) ]; then
        echo "generating $1 (>= $BENCH_MB MB, $2) with a real redis-server ..." >&2
        python3 fixtures/generate.py --bench "$1" --size-mb "$BENCH_MB" --shape "$2"
    fi
}
generate "$RDB" mixed
generate "$SMALL" small-keys
cargo build --release --bins -q

. bench/lib.sh

row() { # name, "secs rss", note
    local t=${2%% *} r=${2##* }
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$t" "$(mbps "$t")" "$(mib "$r")" "$3"
}
ratio() { awk -v a="$ct" -v b="${1%% *}" 'BEGIN{printf "%.1fx", a/b}'; }

# table FILE NAME: rdbtool against redis-check-rdb on one file, as a markdown table.
table() {
    local F=$1 NAME=$2
    SIZE=$(stat -c %s "$F")
    cat "$F" > /dev/null   # warm the page cache: every tool reads the same cached file
    echo "timing (best of $RUNS) on $F ($SIZE bytes)" >&2
    local CHECK VERIFY VERIFY1 DUMP DUMP1 RESP INFO ENCODE ENCODE_CHECK PARQUET MEMORY MEMORY_LINES HDT KEYS OUTSZ
    local ENC_OUT="$BENCH_DIR/reencoded-7.0.rdb"
    CHECK=$(best_of "$RUNS" redis-check-rdb "$F")
    VERIFY=$(best_of "$RUNS" "$TOOL" verify "$F")
    VERIFY1=$(best_of "$RUNS" env FERROKV_THREADS=1 "$TOOL" verify "$F")
    DUMP=$(best_of "$RUNS" "$TOOL" dump "$F")
    DUMP1=$(best_of "$RUNS" env FERROKV_THREADS=1 "$TOOL" dump "$F")
    RESP=$(best_of "$RUNS" "$TOOL" dump --format resp "$F")
    INFO=$(best_of "$RUNS" "$TOOL" info "$F")
    ENCODE=$(best_of "$RUNS" "$TOOL" convert "$F" "$ENC_OUT" --to rdb:redis-7.0)
    ENCODE_CHECK=$(redis-check-rdb "$ENC_OUT" 2>&1 | grep -c "RDB looks OK" || true)
    rm -f "$ENC_OUT"
    PARQUET=$(best_of "$RUNS" "$TOOL" convert "$F" "$BENCH_DIR/parquet" --to parquet)
    rm -rf "$BENCH_DIR/parquet"
    MEMORY=$(best_of "$RUNS" "$TOOL" memory --format json "$F")
    MEMORY_LINES=$(best_of "$RUNS" "$TOOL" memory --format jsonl "$F")
    HDT=""
    if [ -n "${HDT_RDB:-}" ] && [ -x "$HDT_RDB" ]; then
        HDT=$(best_of "$RUNS" "$HDT_RDB" -c memory -o "$BENCH_DIR/hdt-memory.csv" "$F")
    fi
    KEYS=$("$TOOL" info --json "$F" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"])')
    OUTSZ=$("$TOOL" dump "$F" | wc -c)
    ct=${CHECK%% *}
    echo
    echo "### $NAME: \`$F\`"
    echo
    echo "$SIZE bytes, $KEYS keys, written by $(redis-server --version | cut -d' ' -f1-3) from"
    echo "\`python3 fixtures/generate.py --bench $F --size-mb $BENCH_MB --shape $3\` (fixtures/README.md)."
    echo
    echo "| command | seconds | MB/s of input | peak RSS MiB | note |"
    echo "|---|---:|---:|---:|---|"
    row "redis-check-rdb" "$CHECK" "reference"
    row "rdbtool verify" "$VERIFY" "$(ratio "$VERIFY") redis-check-rdb (target >= 7x)"
    row "rdbtool verify, 1 thread" "$VERIFY1" "$(ratio "$VERIFY1") redis-check-rdb"
    row "rdbtool dump (jsonl) > /dev/null" "$DUMP" "$OUTSZ bytes of output"
    row "rdbtool dump (jsonl), 1 thread" "$DUMP1" ""
    row "rdbtool dump --format resp" "$RESP" ""
    row "rdbtool info" "$INFO" "structure only, CRC checked"
    row "rdbtool convert --to rdb:redis-7.0" "$ENCODE" "decode + encode on every core; redis-check-rdb on the output: $([ "$ENCODE_CHECK" -gt 0 ] && echo OK || echo FAILED)"
    row "rdbtool convert --to parquet (keys.parquet, elements.parquet)" "$PARQUET" "decode and encode on two threads; zstd"
    row "rdbtool memory --format json (the report)" "$MEMORY" "target >= 500 MB/s (issue #17)"
    row "rdbtool memory --format jsonl (a line per key)" "$MEMORY_LINES" ""
    if [ -n "$HDT" ]; then
        row "HDT3213/rdb -c memory (a CSV line per key)" "$HDT" "reference, same run (\$HDT_RDB)"
    else
        echo "| HDT3213/rdb -c memory | | | | not timed: set HDT_RDB to its binary |"
    fi
}

DIFF_REPORT=$(./bench/diff.sh 2>&1 | tail -12)
DIFF_LINE=$(echo "$DIFF_REPORT" | grep '^rdbtool diff' | sed -E 's/.*exit [0-9]+, //')
DIFF_SECS=${DIFF_LINE%% s *}
DIFF_KB=$(echo "$DIFF_LINE" | awk '{print $3}')

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
cat <<HDR
# Benchmarks

Produced by \`make bench\` (bench/run.sh) on $(date -u +%Y-%m-%d). Each command ran $RUNS times on a
warm page cache; the fastest run is reported. Peak RSS is \`/usr/bin/time\`'s maximum resident set.

- Machine: $(nproc) cores ($CPU), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr).
- Inputs: two RDBs of about $BENCH_MB MB written by a real Redis: comparatively few, larger keys
  (mixed), and millions of small keys (small-keys: the shape of caches and session stores).
- Reference: $(redis-check-rdb --version 2>/dev/null | head -1) on the same file in the same run.

## rdbtool vs redis-check-rdb
HDR
table "$RDB" "Mixed dataset" mixed
table "$SMALL" "Small keys" small-keys
SIZE=$(stat -c %s "$RDB")
echo
echo "\`rdbtool diff\` of the mixed file and a copy with 1 % of its keys changed (bench/diff.sh):"
echo
echo "| command | seconds | MB/s of input | peak RSS MiB | note |"
echo "|---|---:|---:|---:|---|"
echo "| rdbtool diff big.rdb big-changed.rdb (1% of keys changed) | $DIFF_SECS | $(mbps "$DIFF_SECS") | $(mib "$DIFF_KB") | target <= 10 s, <= 512 MiB; counts checked below |"
echo
echo "diff against the changes made (bench/diff.sh; big-changed.rdb made by fixtures/diff/mutate.py through a real redis-server):"
echo
echo '```'
echo "$DIFF_REPORT"
echo '```'
cat <<'TAIL'

Targets (issue #2): verify >= 7x redis-check-rdb's throughput, dump jsonl >= 300 MB/s of input,
peak RSS <= 64 MiB; on the small-keys file (issue #19): dump jsonl >= 600 MB/s, resp >= 800 MB/s.
How: the main thread walks record boundaries and hands ~1 MiB batches to one worker fewer than
the cores, decoding a queued batch itself whenever the queue is full (tools/src/pipeline.rs); verify checks LZF streams without decompressing them; JSON escaping
scans 8 bytes at a time; the CRC is fed as records are read and mapped pages behind the
written output are released, so RSS stays flat whatever the file size.
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
./bench/engine.sh "$RDB" "$SMALL" >> docs/benchmarks.md.new
echo "AOF benchmarks ..." >&2
BENCH_DIR="$BENCH_DIR" BENCH_RUNS="$RUNS" ./bench/aof.sh >> docs/benchmarks.md.new
echo "server benchmarks ..." >&2
./bench/server.sh >> docs/benchmarks.md.new
echo "offline rewrite of a large base ..." >&2
BENCH_DIR="$BENCH_DIR" ./bench/rewrite.sh >> docs/benchmarks.md.new
echo "restore benchmarks ..." >&2
BENCH_DIR="$BENCH_DIR" BENCH_RUNS="$RUNS" ./bench/restore.sh >> docs/benchmarks.md.new
cat bench/analysis.md >> docs/benchmarks.md.new
mv docs/benchmarks.md.new docs/benchmarks.md
cat docs/benchmarks.md
