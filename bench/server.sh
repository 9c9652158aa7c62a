#!/usr/bin/env bash
# The server's throughput (issue #6): redis-benchmark against ferrokv-server and a real
# redis-server 7.0 in the same run, pipelined (-P 16) and not (-P 1). Prints a markdown
# section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
#   BENCH_N       requests per test (default 200000)
#   BENCH_ROUNDS  rounds; servers alternate within each round and the best of each is kept
#                 (default 3), so a burst of load on the machine hits both alike
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_N:-200000}
ROUNDS=${BENCH_ROUNDS:-3}
TESTS=set,get,incr,lpush,rpop,sadd,hset,zadd,lrange_100
WORK=$(mktemp -d)
OURS=target/release/ferrokv-server
cargo build -q --release -p ferrokv-server

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RPORT=$(free_port)
FPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK" --save "" --appendonly no --logfile "$WORK/redis.log" &
RPID=$!
mkdir -p "$WORK/ours"
"$OURS" --port "$FPORT" --dir "$WORK/ours" --save "" --appendonly no > "$WORK/ours.log" &
FPID=$!
trap 'kill $RPID $FPID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
for p in "$RPORT" "$FPORT"; do
    until redis-cli -p "$p" PING 2>/dev/null | grep -q PONG; do sleep 0.05; done
done

# run PORT PIPELINE: "test rps" lines.
run() {
    redis-cli -p "$1" FLUSHALL > /dev/null
    redis-benchmark -p "$1" -q -n "$N" -c 50 -P "$2" -t "$TESTS" --csv 2>/dev/null |
        tail -n +2 | grep -v needed | tr -d '"' | awk -F, '{split($1, w, " "); print tolower(w[1]), $2}'
}
declare -A BEST=()
keep() { # server pipeline lines
    local t v
    while read -r t v; do
        local k="$1 $2 $t"
        if [ -z "${BEST[$k]:-}" ] || awk -v a="$v" -v b="${BEST[$k]}" 'BEGIN{exit !(a>b)}'; then BEST[$k]=$v; fi
    done <<< "$3"
}
for round in $(seq "$ROUNDS"); do
    for P in 1 16; do
        echo "round $round, -P $P ..." >&2
        keep redis "$P" "$(run "$RPORT" "$P")"
        keep ours "$P" "$(run "$FPORT" "$P")"
    done
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo
echo '## Server (issue #6): `bench/server.sh`'
echo
echo "redis-benchmark -q -n $N -c 50 -t $TESTS, -P 1 and -P 16, against ferrokv-server and"
echo "$(redis-server --version | cut -d' ' -f1-3) (no persistence on either), alternating, $ROUNDS rounds; the"
echo "best requests/s of each is kept. $(nproc) cores ($CPU): the client shares them with the server,"
echo "so compare ratios, not absolute numbers. Target: ferrokv >= 1.0x redis on every test."
for P in 1 16; do
    echo
    echo "### -P $P"
    echo
    echo "| test | redis-server rps | ferrokv-server rps | ratio |"
    echo "|---|---:|---:|---:|"
    for t in ${TESTS//,/ }; do
        r=${BEST["redis $P $t"]:-0}
        o=${BEST["ours $P $t"]:-0}
        ratio=$(awk -v a="$o" -v b="$r" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }')
        printf '| %s | %.0f | %.0f | %s |\n' "$t" "$r" "$o" "$ratio"
    done
done
