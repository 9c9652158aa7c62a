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
#   BENCH_N       requests per test (default 200000)
#   BENCH_ROUNDS  pairs per test and pipeline depth (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_N:-200000}
ROUNDS=${BENCH_ROUNDS:-5}
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

# rps PORT PIPELINE TEST: requests per second of one redis-benchmark test. The tests of a
# round run in the same order on both servers, so each sees the same data (rpop pops what
# lpush pushed).
rps() {
    redis-benchmark -p "$1" -q -n "$N" -c 50 -P "$2" -t "$3" --csv 2>/dev/null |
        tail -n +2 | grep -v needed | tr -d '"' | cut -d, -f2
}
RESULTS="$WORK/results" # lines: pipeline test redis_rps ours_rps
for round in $(seq "$ROUNDS"); do
    for P in 1 16; do
        echo "round $round, -P $P ..." >&2
        redis-cli -p "$RPORT" FLUSHALL > /dev/null
        redis-cli -p "$FPORT" FLUSHALL > /dev/null
        for t in ${TESTS//,/ }; do
            if [ $((round % 2)) = 1 ]; then
                r=$(rps "$RPORT" "$P" "$t")
                o=$(rps "$FPORT" "$P" "$t")
            else
                o=$(rps "$FPORT" "$P" "$t")
                r=$(rps "$RPORT" "$P" "$t")
            fi
            echo "$P $t $r $o" >> "$RESULTS"
        done
    done
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo
echo '## Server (issue #6): `bench/server.sh`'
echo
echo "redis-benchmark -q -n $N -c 50 -t $TESTS, -P 1 and -P 16, against ferrokv-server and"
echo "$(redis-server --version | cut -d' ' -f1-3) (no persistence on either). Each test ran $ROUNDS times as a pair, one server"
echo "right after the other (alternating which goes first); rps columns are medians, the ratio is the"
echo "median of the $ROUNDS pairs' ratios, with the lowest and highest pair beside it. $(nproc) cores ($CPU):"
echo "the client shares them with the server, so compare ratios, not absolute numbers."
echo "Target: ferrokv >= 1.0x redis on every test."
python3 - "$RESULTS" "$TESTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 4]
for p in ("1", "16"):
    print(f"\n### -P {p}\n")
    print("| test | redis-server rps | ferrokv-server rps | ratio (median) | lowest..highest pair |")
    print("|---|---:|---:|---:|---:|")
    for t in sys.argv[2].split(","):
        pairs = [(float(r), float(o)) for (pp, tt, r, o) in rows if (pp, tt) == (p, t)]
        pairs = [(r, o) for r, o in pairs if r > 0]
        if not pairs:
            print(f"| {t} | n/a | n/a | n/a | |")
            continue
        ratios = sorted(o / r for r, o in pairs)
        print(f"| {t} | {statistics.median(r for r, _ in pairs):.0f} | {statistics.median(o for _, o in pairs):.0f} "
              f"| {statistics.median(ratios):.2f}x | {ratios[0]:.2f}..{ratios[-1]:.2f} |")
PY
