#!/usr/bin/env bash
# rdbtool restore against `rdbtool dump --format resp | redis-cli --pipe`, into the same
# fresh redis-server (Debian's, no persistence), same machine, same run. Two datasets,
# written by that redis-server: millions of small strings, a mixed one (small hashes,
# sets, zsets and lists, a third of the keys with a TTL), and one of mid-sized collections. Prints a markdown
# section (make bench appends it to docs/benchmarks.md).
#
#   BENCH_DIR            where the datasets live (default /tmp/ferrokv-bench)
#   BENCH_RESTORE_KEYS   keys of the small-strings dataset (default 2000000)
#   BENCH_MIXED_KEYS     keys of the mixed dataset (default 1000000)
#   BENCH_COLLECTION_KEYS  keys of the collections dataset (default 100000)
#   BENCH_RUNS           timed runs per command; the best is reported (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/ferrokv-bench}
SMALL_KEYS=${BENCH_RESTORE_KEYS:-2000000}
MIXED_KEYS=${BENCH_MIXED_KEYS:-1000000}
COLL_KEYS=${BENCH_COLLECTION_KEYS:-100000}
RUNS=${BENCH_RUNS:-3}
TOOL=$PWD/target/release/rdbtool
mkdir -p "$BENCH_DIR"
cargo build --release --bins -q

start_server() { # dir -> port (a fresh redis-server, killed by stop_server)
    local dir=$1 port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    for _ in $(seq 100); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
    echo "$port"
}
stop_server() { kill "$(cat "$1/redis.pid")" 2> /dev/null || true; sleep 0.5; }

# generate NAME KIND KEYS: $BENCH_DIR/restore-NAME.rdb, written by a real redis-server.
generate() {
    local out="$BENCH_DIR/restore-$1.rdb" dir port
    if [ -s "$out" ]; then return; fi
    echo "generating $out ($3 keys, $2) with redis-server ..." >&2
    dir=$(mktemp -d)
    port=$(start_server "$dir")
    python3 - "$2" "$3" <<'EOF' | redis-cli -p "$port" --pipe > /dev/null
import random, sys
kind, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
out = sys.stdout.buffer
def cmd(*args):
    parts = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
    out.write(b''.join(parts))
def word():
    return ''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rng.randint(3, 12)))
for i in range(n):
    if kind == 'collections':
        key = 'coll:%d' % i
        r = i % 4
        if r == 0:
            args = []
            for f in range(100):
                args += ['field%d' % f, word()]
            cmd('HSET', key, *args)
        elif r == 1:
            cmd('SADD', key, *[word() + str(m) for m in range(200)])
        elif r == 2:
            args = []
            for m in range(100):
                args += ['%.3f' % rng.uniform(0, 1000), word() + str(m)]
            cmd('ZADD', key, *args)
        else:
            cmd('RPUSH', key, *[word() for _ in range(150)])
        continue
    if kind == 'small':
        cmd('SET', 'key:%d' % i, 'value:%d:%s' % (i, word() * 3))
        continue
    r = i % 10
    key = 'obj:%d' % i
    if r < 4:
        cmd('SET', key, word() * rng.randint(1, 6))
    elif r < 7:
        args = []
        for f in range(10):
            args += ['field%d' % f, word()]
        cmd('HSET', key, *args)
    elif r < 8:
        cmd('SADD', key, *[word() for _ in range(8)])
    elif r < 9:
        args = []
        for m in range(8):
            args += ['%.3f' % rng.uniform(0, 1000), word()]
        cmd('ZADD', key, *args)
    else:
        cmd('RPUSH', key, *[word() for _ in range(8)])
    if i % 3 == 0:
        cmd('EXPIRE', key, 10_000_000 + i)
EOF
    redis-cli -p "$port" save > /dev/null
    stop_server "$dir"
    mv "$dir/dump.rdb" "$out"
    rm -rf "$dir"
}

generate small small "$SMALL_KEYS"
generate mixed mixed "$MIXED_KEYS"
generate collections collections "$COLL_KEYS"

# time_into PORT CMD: seconds of CMD after a FLUSHALL (best of RUNS).
time_into() {
    local port=$1 best="" t tf
    shift
    tf=$(mktemp)
    for _ in $(seq "$RUNS"); do
        redis-cli -p "$port" flushall > /dev/null
        /usr/bin/time -f "%e" -o "$tf" bash -c "$*" > /dev/null 2> /dev/null
        t=$(tail -1 "$tf")
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN{exit !(a<b)}'; then best=$t; fi
    done
    rm -f "$tf"
    echo "$best"
}

echo
echo "## Restore into a running Redis"
echo
echo "\`bench/restore.sh\` (in \`make bench\`): each file restored into the same fresh Debian"
echo "redis-server $(redis-server --version | sed -E 's/.*v=([0-9.]+).*/\1/') (no persistence) on this machine, best of $RUNS after a FLUSHALL;"
echo "the two tools share the machine's $(nproc) cores with the server."
echo
echo "| dataset | keys | rdbtool restore | dump --format resp \\| redis-cli --pipe | ratio |"
echo "|---|---:|---:|---:|---:|"
for name in small mixed collections; do
    rdb="$BENCH_DIR/restore-$name.rdb"
    dir=$(mktemp -d)
    port=$(start_server "$dir")
    keys=$("$TOOL" info --json "$rdb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"])')
    ours=$(time_into "$port" "$TOOL restore $rdb --to redis://127.0.0.1:$port")
    got=$(redis-cli -p "$port" dbsize)
    pipe=$(time_into "$port" "$TOOL dump --format resp $rdb | redis-cli -p $port --pipe")
    stop_server "$dir"
    rm -rf "$dir"
    if [ "$got" != "$keys" ]; then echo "restore of $name left $got keys of $keys" >&2; exit 1; fi
    printf '| %s | %s | %s s (%s keys/s) | %s s (%s keys/s) | %s× |\n' "$name" "$keys" \
        "$ours" "$(awk -v k="$keys" -v t="$ours" 'BEGIN{printf "%.0f", k/t}')" \
        "$pipe" "$(awk -v k="$keys" -v t="$pipe" 'BEGIN{printf "%.0f", k/t}')" \
        "$(awk -v a="$ours" -v b="$pipe" 'BEGIN{printf "%.2f", b/a}')"
done
echo
echo "small: \`SET key:N value\` × $SMALL_KEYS; mixed: $MIXED_KEYS keys, 40% strings, 30% hashes of 10 fields,"
echo "10% each sets, zsets and lists of 8, every third key with a TTL; collections: $COLL_KEYS keys, a quarter each"
echo "hashes of 100 fields and zsets of 100 members (listpacks), sets of 200 members (hashtables) and lists of 150."
