#!/usr/bin/env bash
# The AOF benchmarks (issue #5), against a real redis-server 7.0 in the same run. Prints a
# markdown section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
#   BENCH_DIR     where the big AOF is cached (default /tmp/ferrokv-bench)
#   BENCH_AOF_MB  RESP written per phase, in MB (default 1100; two phases)
#   BENCH_RUNS    timed runs of the verifiers; the best is reported (default 3)
#
# The AOF: a redis-server 7.0 with appendonly yes and aof-use-rdb-preamble no takes phase 1
# of bench/aof_gen.py through `redis-cli --pipe`, runs BGREWRITEAOF (so a RESP base holds
# phase 1), then takes phase 2 (new keys and updates, in the incr file). Made once, kept in
# $BENCH_DIR/aof/appendonlydir.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/ferrokv-bench}
PHASE_MB=${BENCH_AOF_MB:-1100}
RUNS=${BENCH_RUNS:-3}
GEN="$BENCH_DIR/aof"
AOF="$GEN/appendonlydir"
MANIFEST="$AOF/appendonly.aof.manifest"
WORK=$(mktemp -d -p "$BENCH_DIR")
. bench/lib.sh
trap cleanup EXIT
# rewrite_and_wait: BGREWRITEAOF, then poll until it is over; prints the wall seconds.
rewrite_and_wait() {
    local before start end
    before=$(info aof_rewrites)
    start=$(date +%s.%N)
    redis-cli -p "$PORT" BGREWRITEAOF > /dev/null
    until [ "$(info aof_rewrite_in_progress)" = 0 ] && [ "$(info aof_rewrite_scheduled)" = 0 ] \
        && [ "$(info aof_rewrites)" != "$before" ]; do sleep 0.02; done
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}'
}

if [ ! -s "$MANIFEST" ] || [ ! -e "$GEN/complete" ]; then
    echo "generating $AOF (2 x $PHASE_MB MB of RESP) with a real redis-server ..." >&2
    rm -rf "$GEN"
    mkdir -p "$GEN"
    start_server "$GEN" --aof-use-rdb-preamble no
    python3 bench/aof_gen.py --phase 1 --mb "$PHASE_MB" | redis-cli -p "$PORT" --pipe > /dev/null
    rewrite_and_wait > /dev/null
    python3 bench/aof_gen.py --phase 2 --mb "$PHASE_MB" | redis-cli -p "$PORT" --pipe > /dev/null
    stop_server
    touch "$GEN/complete"
fi
cargo build --release --bins -q
SIZE=$(du -cb "$AOF"/*.aof | tail -1 | cut -f1)
FILES=$(cd "$AOF" && ls -1 ./*.aof | sed 's|^\./||' | tr '\n' ' ')
cat "$AOF"/* > /dev/null   # warm the page cache

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a/b}'; }

echo "timing the verifiers (best of $RUNS) on $AOF ($SIZE bytes) ..." >&2
CHECK_OUT=$(redis-check-aof "$MANIFEST" 2>&1 | tail -1)
CHECK=$(best_of "$RUNS" redis-check-aof "$MANIFEST")
VERIFY_OUT=$(target/release/aoftool verify "$AOF" 2>&1 | head -1)
VERIFY=$(best_of "$RUNS" target/release/aoftool verify "$AOF")
VERIFY1=$(best_of "$RUNS" env FERROKV_THREADS=1 target/release/aoftool verify "$AOF")
COMMANDS=$(target/release/aoftool verify --json "$AOF" | python3 -c 'import json,sys; print(json.load(sys.stdin)["commands"])')

echo "aof-rewrite (offline) ..." >&2
REWRITE_RESP=$(best_of 1 target/release/aof-rewrite "$AOF" "$WORK/out-resp" --base resp)
REWRITE_RDB=$(best_of 1 target/release/aof-rewrite "$AOF" "$WORK/out-rdb" --base rdb)
KEYS_OURS=$(target/release/replay "$WORK/out-rdb" | awk '/^keys:/{print $2}')
rm -rf "$WORK/out-resp" "$WORK/out-rdb"

echo "redis-server: load, BGREWRITEAOF ..." >&2
mkdir -p "$WORK/redis"
cp -r "$AOF" "$WORK/redis/appendonlydir"
START=$(date +%s.%N)
start_server "$WORK/redis" --aof-use-rdb-preamble no
END=$(date +%s.%N)
LOAD_SECS=$(awk -v a="$START" -v b="$END" 'BEGIN{printf "%.2f", b-a}')
KEYS_REDIS=$(( $(redis-cli -p "$PORT" DBSIZE) + $(redis-cli -p "$PORT" -n 1 DBSIZE) ))
USED=$(redis-cli -p "$PORT" INFO memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}')
BG_RESP=$(rewrite_and_wait)
BG_RESP_SEC=$(info aof_last_rewrite_time_sec)
redis-cli -p "$PORT" CONFIG SET aof-use-rdb-preamble yes > /dev/null
BG_RDB=$(rewrite_and_wait)
BG_RDB_SEC=$(info aof_last_rewrite_time_sec)
REDIS_HWM=$(awk '/VmHWM/{print $2}' "/proc/$RPID/status")
stop_server

t() { echo "${1%% *}"; }
r() { mib "${1##* }"; }
cat <<MD

## AOF (issue #5): \`bench/aof.sh\`

A multi-part AOF written by $(redis-server --version | cut -d' ' -f1-3) (appendonly yes,
aof-use-rdb-preamble no): \`python3 bench/aof_gen.py\` phase 1 ($PHASE_MB MB of RESP, mixed types)
through \`redis-cli --pipe\`, BGREWRITEAOF, phase 2 ($PHASE_MB MB: new keys, updates, DEL,
MULTI/EXEC) into the incr file. \`$AOF\`: $FILES- $SIZE bytes, $COMMANDS commands,
$KEYS_REDIS keys. Verifiers: best of $RUNS on a warm page cache; rewrites: one run each.

| command | seconds | MB/s of input | peak RSS MiB | note |
|---|---:|---:|---:|---|
| \`redis-check-aof $MANIFEST\` | $(t "$CHECK") | $(mbps "$(t "$CHECK")") | $(r "$CHECK") | reference; says: $CHECK_OUT |
| \`aoftool verify $AOF\` | $(t "$VERIFY") | $(mbps "$(t "$VERIFY")") | $(r "$VERIFY") | $(ratio "$(t "$CHECK")" "$(t "$VERIFY")") redis-check-aof (target >= 6x); says: $VERIFY_OUT |
| \`aoftool verify\`, 1 thread | $(t "$VERIFY1") | $(mbps "$(t "$VERIFY1")") | $(r "$VERIFY1") | $(ratio "$(t "$CHECK")" "$(t "$VERIFY1")") redis-check-aof |

Rewriting the same dataset ($KEYS_OURS keys after our replay, $KEYS_REDIS in Redis):

| | seconds | peak RSS MiB | note |
|---|---:|---:|---|
| redis-server: BGREWRITEAOF, RESP base (start to \`aof_rewrite_in_progress:0\`) | $BG_RESP | $(mib "$REDIS_HWM") | server's VmHWM (dataset $(awk -v b="$USED" 'BEGIN{printf "%.0f", b/1048576}') MiB used_memory); \`aof_last_rewrite_time_sec\` $BG_RESP_SEC |
| \`aof-rewrite --base resp\` (replay + write) | $(t "$REWRITE_RESP") | $(r "$REWRITE_RESP") | $(ratio "$BG_RESP" "$(t "$REWRITE_RESP")") BGREWRITEAOF (target >= 1.0x) |
| redis-server: BGREWRITEAOF, RDB base (aof-use-rdb-preamble yes) | $BG_RDB | | \`aof_last_rewrite_time_sec\` $BG_RDB_SEC |
| \`aof-rewrite --base rdb\` (replay + write) | $(t "$REWRITE_RDB") | $(r "$REWRITE_RDB") | $(ratio "$BG_RDB" "$(t "$REWRITE_RDB")") BGREWRITEAOF |
| redis-server: loading the AOF at startup (for scale) | $LOAD_SECS | | start to \`loading:0\` |

BGREWRITEAOF serialises a dataset the server already holds; \`aof-rewrite\` first rebuilds it
from the log (the server's startup load is the comparable step), so its time is load plus write.
MD
