#!/usr/bin/env bash
# The engine's benchmarks (issue #4), against a real redis-server 7.0 in the same run.
# Prints a markdown section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
#   RDB...   the >= 1 GB RDBs written by a real Redis (bench/run.sh makes them): each is
#            loaded by redis-server and by the engine
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/engine.sh BIG.rdb [MORE.rdb...]" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cargo build -q --release -p ferrokv --example load_rdb
LINES=$(cargo bench -q -p ferrokv --bench engine 2>/dev/null | grep -E '^(engine_|mem_)')
val() { echo "$LINES" | awk -v k="$1" '$1==k{print $2}'; }

# load_rows RDB: redis-server loading the file at boot, then our engine opening it: two
# table rows (time, peak RSS, keys).
load_rows() {
    local RDB=$1
    rm -rf "$WORK/redis" "$WORK/ours" "$WORK/redis.log"
    mkdir -p "$WORK/redis" "$WORK/ours"
    ln -s "$(readlink -f "$RDB")" "$WORK/redis/dump.rdb"
    ln -s "$(readlink -f "$RDB")" "$WORK/ours/dump.rdb"
    PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    START=$(date +%s.%N)
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$WORK/redis" --save "" --appendonly no \
        --logfile "$WORK/redis.log" &
    RPID=$!
    until redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG; do sleep 0.05; done
    while redis-cli -p "$PORT" INFO persistence | grep -q '^loading:1'; do sleep 0.05; done
    END=$(date +%s.%N)
    REDIS_SECS=$(awk -v a="$START" -v b="$END" 'BEGIN{printf "%.2f", b-a}')
    REDIS_LOADED=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$WORK/redis.log" | grep -o '[0-9.]*' | head -1)
    REDIS_HWM=$(awk '/VmHWM/{print $2}' /proc/$RPID/status)
    REDIS_KEYS=$(redis-cli -p "$PORT" DBSIZE)
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait $RPID 2>/dev/null || true

    TF=$(mktemp)
    OUT=$(/usr/bin/time -f "%e %M" -o "$TF" target/release/examples/load_rdb "$WORK/ours")
    read -r OUR_SECS OUR_KB < "$TF"
    rm -f "$TF"
    echo "| redis-server 7.0 loading \`$(basename "$RDB")\` (start to \`loading:0\`; its log says ${REDIS_LOADED:-?} s) | $REDIS_SECS | $((REDIS_HWM / 1024)) | $REDIS_KEYS |"
    echo "| ferrokv \`Engine::open\` of \`$(basename "$RDB")\` (\`target/release/examples/load_rdb\`) | $OUR_SECS | $((OUR_KB / 1024)) | $(echo "$OUT" | awk '{print $1}') |"
}
ROWS=$(for f in "$@"; do load_rows "$f"; done)

cat <<MD

## Engine (issue #4): \`bench/engine.sh\`

Library throughput: \`Engine::execute\` (argv in, reply out, one thread) over 1 M keys
\`key:N\`, from \`cargo bench -p ferrokv --bench engine\`.

| command | commands/s |
|---|---:|
| SET | $(val engine_set) |
| GET | $(val engine_get) |
| LPUSH | $(val engine_lpush) |
| HSET | $(val engine_hset) |
| ZADD | $(val engine_zadd) |

Memory for 1 M small string keys (\`key:N\` = \`value:N\`; Redis made them with \`DEBUG POPULATE 1000000\`):

| | bytes per key |
|---|---:|
| ferrokv, growth of the process RSS | $(val mem_ours_rss_per_key) |
| redis-server 7.0, growth of \`used_memory\` | $(val mem_redis_used_memory_per_key) |
| redis-server 7.0, growth of \`used_memory_rss\` | $(val mem_redis_rss_per_key) |
| ratio ours / Redis used_memory (target <= 1.0) | $(val mem_ratio_vs_used_memory) |

Loading at startup (the files of the tables above):

| | seconds | peak RSS MiB | keys |
|---|---:|---:|---:|
$ROWS
MD
