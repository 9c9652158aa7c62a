#!/usr/bin/env bash
# The engine's benchmarks (issue #4), against a real redis-server 7.0 in the same run.
# Prints a markdown section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
#   RDB...   the >= 1 GB RDBs written by a real Redis (bench/run.sh makes them): each is
#            loaded by redis-server and by the engine
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 1 ] || { echo "usage: bench/engine.sh BIG.rdb [MORE.rdb...]" >&2; exit 2; }
WORK=$(mktemp -d)
trap cleanup EXIT

cargo build -q --release -p ferrokv-server
LINES=$(cargo bench -q -p ferrokv --bench engine 2>/dev/null | grep -E '^(engine_|mem_)')
val() { echo "$LINES" | awk -v k="$1" '$1==k{print $2}'; }

# load_one SERVER DIR: SERVER (redis-server or ours) started on DIR's dump.rdb, timed from
# its start to `loading:0` as a user waits for it; prints "seconds peak_rss_mib keys used_memory".
load_one() {
    local bin=$1 dir=$2 start end
    PORT=$(free_port)
    start=$(date +%s.%N)
    "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
        --logfile "$dir/server.log" &
    RPID=$!
    wait_loaded
    end=$(date +%s.%N)
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}')" \
        "$(awk '/VmHWM/{printf "%.0f", $2/1024}' /proc/$RPID/status)" \
        "$(redis-cli -p "$PORT" DBSIZE)" "$(info used_memory memory)"
    stop_server
}

# populate_one SERVER: SERVER (redis-server or ours) empty, then `DEBUG POPULATE 1000000`
# (keys `key:N`, values `value:N`); prints the growth per key of "used_memory rss" (INFO's
# used_memory; VmRSS of /proc/PID/status, the same for both servers).
populate_one() {
    local bin=$1 u0 r0 u1 r1
    PORT=$(free_port)
    mkdir -p "$WORK/populate"
    "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$WORK/populate" --save "" --appendonly no \
        --enable-debug-command yes --logfile "$WORK/populate/server.log" &
    RPID=$!
    wait_loaded
    u0=$(info used_memory memory)
    r0=$(awk '/VmRSS/{printf "%d", $2 * 1024}' /proc/$RPID/status)
    redis-cli -p "$PORT" DEBUG POPULATE 1000000 > /dev/null
    u1=$(info used_memory memory)
    r1=$(awk '/VmRSS/{printf "%d", $2 * 1024}' /proc/$RPID/status)
    awk -v a="$u0" -v b="$u1" -v c="$r0" -v d="$r1" 'BEGIN{printf "%.1f %.1f", (b-a)/1e6, (d-c)/1e6}'
    stop_server
}
read -r -a POP_REDIS <<< "$(populate_one redis-server)"
read -r -a POP_OURS <<< "$(populate_one target/release/ferrokv-server)"

# load_rows RDB: redis-server 7.0 and ferrokv-server loading the file at boot, the same way:
# two table rows (time, peak RSS, used_memory, keys).
load_rows() {
    local RDB=$1 r o
    rm -rf "$WORK/redis" "$WORK/ours"
    mkdir -p "$WORK/redis" "$WORK/ours"
    ln -s "$(readlink -f "$RDB")" "$WORK/redis/dump.rdb"
    ln -s "$(readlink -f "$RDB")" "$WORK/ours/dump.rdb"
    read -r -a r <<< "$(load_one redis-server "$WORK/redis")"
    read -r -a o <<< "$(load_one target/release/ferrokv-server "$WORK/ours")"
    local logged
    logged=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$WORK/redis/server.log" | grep -o '[0-9.]*' | head -1)
    echo "| redis-server 7.0 loading \`$(basename "$RDB")\` (its log says ${logged:-?} s) | ${r[0]} | ${r[1]} | $(mib $((r[3] / 1024))) | ${r[2]} |"
    echo "| ferrokv-server loading \`$(basename "$RDB")\` | ${o[0]} | ${o[1]} | $(mib $((o[3] / 1024))) | ${o[2]} |"
    echo "| ratio ferrokv / Redis (target <= 0.8 on the small-keys file) | $(awk -v a="${o[0]}" -v b="${r[0]}" 'BEGIN{printf "%.2f", a/b}') | $(awk -v a="${o[1]}" -v b="${r[1]}" 'BEGIN{printf "%.2f", a/b}') | $(awk -v a="${o[3]}" -v b="${r[3]}" 'BEGIN{printf "%.2f", a/b}') | |"
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

Memory for 1 M small string keys (\`key:N\` = \`value:N\`, made by \`DEBUG POPULATE 1000000\` in each server):

| | bytes per key |
|---|---:|
| ferrokv-server, \`DEBUG POPULATE\`: growth of \`used_memory\` | ${POP_OURS[0]} |
| ferrokv-server, \`DEBUG POPULATE\`: growth of the RSS | ${POP_OURS[1]} |
| redis-server 7.0, \`DEBUG POPULATE\`: growth of \`used_memory\` | ${POP_REDIS[0]} |
| redis-server 7.0, \`DEBUG POPULATE\`: growth of the RSS | ${POP_REDIS[1]} |
| ratio ferrokv-server's RSS / Redis's used_memory (target <= 1.0) | $(awk -v a="${POP_OURS[1]}" -v b="${POP_REDIS[0]}" 'BEGIN{printf "%.2f", a/b}') |
| the library alone (\`Engine::execute\` of SET in the bench process, glibc's malloc): growth of the RSS | $(val mem_ours_rss_per_key) |

The servers are measured the same way (each its own allocator: mimalloc here, jemalloc in
Redis; the RSS from \`/proc/PID/status\`). The last row is the engine library in the benchmark
process: glibc's malloc, and the argument vectors the loop formats and frees on the same heap.

Loading at startup (the files of the tables above): each server started on the file, timed
from its start to \`loading:0\` in INFO, peak RSS from \`/proc/PID/status\` (VmHWM), then
\`used_memory\` (ferrokv counts the bytes asked of its allocator, Redis jemalloc's size
classes).

| | seconds | peak RSS MiB | used_memory MiB | keys |
|---|---:|---:|---:|---:|
$ROWS
MD
