#!/usr/bin/env bash
# The server's throughput (issue #6): redis-benchmark against ferrokv-server and a real
# redis-server 7.0 in the same run, pipelined (-P 16) and not (-P 1). Prints a markdown
# section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
# The two servers share the machine with the client, and the host's speed drifts by tens of
# percent within minutes. So each test runs as a pair, one server right after the other
# (which goes first alternates by round), and the ratio reported is the median of the
# pairs' ratios; the lowest and highest pair are shown too.
#
# A third server, server/examples/reply_floor.rs, parses each command and answers +OK
# without running it: its rate, taken right after each pair, is the most this client and
# kernel let any server reach, so each server's share of it shows how much a faster
# server could still gain.
#
#   BENCH_N       requests per test (default 200000)
#   BENCH_ROUNDS  pairs per test and pipeline depth (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_N:-200000}
ROUNDS=${BENCH_ROUNDS:-5}
# redis-benchmark's default list, in its order.
TESTS=ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,lrange_300,lrange_500,lrange_600,mset
WORK=$(mktemp -d)
OURS=target/release/ferrokv-server
CEIL=target/release/examples/reply_floor
cargo build -q --release -p ferrokv-server --bin ferrokv-server --example reply_floor

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RPORT=$(free_port)
FPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK" --save "" --appendonly no --logfile "$WORK/redis.log" &
RPID=$!
mkdir -p "$WORK/ours"
"$OURS" --port "$FPORT" --dir "$WORK/ours" --save "" --appendonly no > "$WORK/ours.log" &
FPID=$!
CPORT=$(free_port)
"$CEIL" "$CPORT" &
CPID=$!
trap 'kill $RPID $FPID $CPID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
for p in "$RPORT" "$FPORT" "$CPORT"; do
    until redis-cli -p "$p" PING 2>/dev/null | grep -qE 'PONG|OK'; do sleep 0.05; done
done

# run PORT PID PIPELINE TEST: "rps cpu" of one redis-benchmark test: requests per second, and
# the server's CPU time (user + system, from /proc) in microseconds per request. The tests
# of a round run in the same order on every server, so each sees the same data (rpop pops
# what lpush pushed). lrange_100's CPU includes the LPUSH fill redis-benchmark runs first.
TICK=$(getconf CLK_TCK)
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
run() {
    local before rps
    before=$(cpu_ticks "$2")
    rps=$(redis-benchmark -p "$1" -q -n "$N" -c 50 -P "$3" -t "$4" --csv 2>/dev/null |
        tail -n +2 | grep -v needed | tr -d '"' | cut -d, -f2)
    awk -v r="$rps" -v t="$(($(cpu_ticks "$2") - before))" -v hz="$TICK" -v n="$N" \
        'BEGIN { printf "%s %.3f\n", r, t * 1e6 / hz / n }'
}
RESULTS="$WORK/results" # lines: pipeline test redis_rps redis_cpu ours_rps ours_cpu ceiling_rps ceiling_cpu
for round in $(seq "$ROUNDS"); do
    for P in 1 16; do
        echo "round $round, -P $P ..." >&2
        redis-cli -p "$RPORT" FLUSHALL > /dev/null
        redis-cli -p "$FPORT" FLUSHALL > /dev/null
        for t in ${TESTS//,/ }; do
            if [ $((round % 2)) = 1 ]; then
                r=$(run "$RPORT" "$RPID" "$P" "$t")
                o=$(run "$FPORT" "$FPID" "$P" "$t")
            else
                o=$(run "$FPORT" "$FPID" "$P" "$t")
                r=$(run "$RPORT" "$RPID" "$P" "$t")
            fi
            c=$(run "$CPORT" "$CPID" "$P" "$t")
            echo "$P $t $r $o $c" >> "$RESULTS"
        done
    done
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo
echo '## Server (issue #6): `bench/server.sh`'
echo
echo "redis-benchmark -q -n $N -c 50 -t $TESTS (its default list), -P 1 and -P 16, against ferrokv-server and"
echo "$(redis-server --version | cut -d' ' -f1-3) (no persistence on either). Each test ran $ROUNDS times as a pair, one server"
echo "right after the other (alternating which goes first); rps columns are medians, the ratio is the"
echo "median of the $ROUNDS pairs' ratios, with the lowest and highest pair beside it. $(nproc) cores ($CPU):"
echo "the client shares them with the server, so compare ratios, not absolute numbers."
echo "Target: ferrokv >= 1.0x redis on every test. Ceiling: server/examples/reply_floor.rs, which"
echo "parses each command and sends a reply of the size Redis's would have without running it, timed"
echo "right after each pair: the most this client and kernel let any server reach. The two ceiling"
echo "columns are medians of each server's rate over it in the same round. Server CPU: user + system"
echo "time of the server process (/proc) per request, median over the rounds (each lrange test's"
echo "includes the LPUSH fill redis-benchmark runs before it)."
python3 - "$RESULTS" "$TESTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 8]
med = statistics.median
for p in ("1", "16"):
    print(f"\n### -P {p}\n")
    print("| test | redis-server rps | ferrokv-server rps | ratio (median) | lowest..highest pair "
          "| ceiling rps | redis / ceiling | ferrokv / ceiling | server CPU µs/req, redis : ferrokv |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in sys.argv[2].split(","):
        runs = [tuple(map(float, x[2:])) for x in rows if (x[0], x[1]) == (p, t)]
        runs = [x for x in runs if min(x[0], x[2], x[4]) > 0]
        if not runs:
            print(f"| {t} | n/a | n/a | n/a | | n/a | | | |")
            continue
        ratios = sorted(o / r for r, _, o, _, _, _ in runs)
        print(f"| {t} | {med(x[0] for x in runs):.0f} | {med(x[2] for x in runs):.0f} "
              f"| {med(ratios):.2f}x | {ratios[0]:.2f}..{ratios[-1]:.2f} | {med(x[4] for x in runs):.0f} "
              f"| {med(x[0] / x[4] for x in runs):.2f} | {med(x[2] / x[4] for x in runs):.2f} "
              f"| {med(x[1] for x in runs):.2f} : {med(x[3] for x in runs):.2f} |")
PY
