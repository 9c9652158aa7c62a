#!/usr/bin/env bash
# Offline aof-rewrite of a large RDB base plus a small log (issue #19): the base is streamed
# through and only the keys the log touches are held. Against a real redis-server 7.0 in the
# same run: it loads the same directory, BGREWRITEAOF, and its fork child's peak RSS is read
# from /proc while it runs. Our output is loaded back into Redis and its DEBUG DIGEST compared.
# Prints a markdown section on stdout; bench/run.sh appends it to docs/benchmarks.md.
#
#   BENCH_DIR         where the small-keys RDB lives (bench/run.sh makes it)
#   BENCH_INCR_WRITES commands in the incr file (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/ferrokv-bench}
BASE="$BENCH_DIR/small-keys.rdb"
WRITES=${BENCH_INCR_WRITES:-100000}
WORK=$(mktemp -d -p "$BENCH_DIR")
. bench/lib.sh
trap cleanup EXIT
[ -s "$BASE" ] || { echo "bench/rewrite.sh: $BASE is missing (bench/run.sh generates it)" >&2; exit 2; }

# The AOF directory: the RDB as its base, WRITES commands on keys of the base and new ones.
AOF="$WORK/src/appendonlydir"
mkdir -p "$AOF"
ln "$BASE" "$AOF/appendonly.aof.1.base.rdb" 2>/dev/null || cp "$BASE" "$AOF/appendonly.aof.1.base.rdb"
KEYS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["keys"])' "$BASE.info.json")
python3 - "$WRITES" "$KEYS" > "$AOF/appendonly.aof.1.incr.aof" <<'PY'
import random, sys
writes, keys = int(sys.argv[1]), int(sys.argv[2])
# Key names as fixtures/generate.py --shape small-keys makes them: prefix:N:kind.
prefixes = ['user', 'session', 'cache', 'product', 'order', 'feed', 'cart', 'queue', 'idx', 'stats', 'cfg', 'msg']
rng = random.Random(7)
out = sys.stdout.buffer
def cmd(*a):
    a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
    out.write(b'*%d\r\n' % len(a) + b''.join(b'$%d\r\n%s\r\n' % (len(x), x) for x in a))
def key(kind):
    n = rng.randint(1, keys)
    return '%s:%d:%s' % (prefixes[n % 12], n, kind)
cmd('SELECT', 0)
for i in range(writes):
    x = rng.random()
    if x < 0.30:
        cmd('SET', key('str'), 'updated-%d' % i)
    elif x < 0.40:
        cmd('SET', 'new:%d' % i, 'v' * rng.randint(1, 200))
    elif x < 0.50:
        cmd('HSET', key('hash'), 'id', i, 'seen', 'yes')
    elif x < 0.58:
        cmd('RPUSH', key('list'), 'item-%d' % i)
    elif x < 0.66:
        cmd('SADD', key('set'), 'm%d' % i)
    elif x < 0.74:
        cmd('ZADD', key('zset'), i, 'm%d' % i)
    elif x < 0.82:
        cmd('INCRBY', 'counter:%d' % rng.randint(1, 1000), 3)
    elif x < 0.90:
        cmd('DEL', key('str'))
    elif x < 0.96:
        cmd('PEXPIREAT', key('str'), 4102444800000 + i)
    else:
        cmd('PERSIST', key('hash'))
PY
printf 'file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n' \
    > "$AOF/appendonly.aof.manifest"
cargo build --release --bins -q
cat "$AOF"/* > /dev/null   # warm the page cache
INCR_BYTES=$(stat -c %s "$AOF/appendonly.aof.1.incr.aof")

echo "aof-rewrite of $BASE + $WRITES writes ..." >&2
OUT="$WORK/out"
/usr/bin/time -f "%e %M" -o "$WORK/time" target/release/aof-rewrite "$AOF" "$OUT" > "$WORK/summary" 2>&1
OURS=$(tail -1 "$WORK/time")
HELD=$(grep -o '[0-9]* keys the log touches' "$WORK/summary" | cut -d' ' -f1)
WROTE=$(grep -o 'wrote [0-9]* keys' "$WORK/summary" | cut -d' ' -f2)

echo "redis-server: load, BGREWRITEAOF ..." >&2
mkdir -p "$WORK/redis"
mv "$AOF" "$WORK/redis/appendonlydir"
START=$(date +%s.%N)
start_server "$WORK/redis"
LOAD=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
USED=$(info used_memory memory)
DIGEST=$(redis-cli -p "$PORT" DEBUG DIGEST)
KEYS_REDIS=$(redis-cli -p "$PORT" DBSIZE)
before=$(info aof_rewrites)
START=$(date +%s.%N)
redis-cli -p "$PORT" BGREWRITEAOF > /dev/null
CHILD_HWM=0
until [ "$(info aof_rewrite_in_progress)" = 0 ] && [ "$(info aof_rewrites)" != "$before" ]; do
    for c in $(pgrep -P "$RPID" 2>/dev/null); do
        h=$(awk '/VmHWM/{print $2}' "/proc/$c/status" 2>/dev/null || echo 0)
        [ "${h:-0}" -gt "$CHILD_HWM" ] && CHILD_HWM=$h
    done
    sleep 0.05
done
BG=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
stop_server

echo "loading our output in redis-server ..." >&2
mkdir -p "$WORK/check"
mv "$OUT" "$WORK/check/appendonlydir"
start_server "$WORK/check"
SAME=$([ "$(redis-cli -p "$PORT" DEBUG DIGEST)" = "$DIGEST" ] && echo "same DEBUG DIGEST" || echo "DIGEST DIFFERS")
stop_server

cat <<MD

## Offline AOF rewrite of a large RDB base (issue #19): \`bench/rewrite.sh\`

An AOF directory whose base is \`$BASE\` ($(stat -c %s "$BASE") bytes, $KEYS keys, the small-keys dataset)
and whose incr file holds $WRITES writes ($INCR_BYTES bytes: SET/HSET/RPUSH/SADD/ZADD on keys of the
base and new ones, INCRBY, DEL, PEXPIREAT, PERSIST). \`aof-rewrite\` streams the base through and
holds only the keys the log touches; $(redis-server --version | cut -d' ' -f1-3) loads the same
directory and runs BGREWRITEAOF (aof-use-rdb-preamble yes); the fork child's peak RSS is its
VmHWM, read from /proc every 50 ms while it runs. Our output, loaded back into Redis: $SAME.

| | seconds | peak RSS MiB | note |
|---|---:|---:|---|
| \`aof-rewrite DIR OUT\` | ${OURS%% *} | $(mib "${OURS##* }") | $HELD keys held, $WROTE written; $(awk -v a="${OURS##* }" -v b="$CHILD_HWM" 'BEGIN{printf "%.1f%%", 100*a/b}') of the child's peak (target <= 25%) |
| redis-server: BGREWRITEAOF | $BG | $(mib "$CHILD_HWM") | the fork child; the server holds $(awk -v b="$USED" 'BEGIN{printf "%.0f", b/1048576}') MiB used_memory, $KEYS_REDIS keys |
| redis-server: loading the directory at startup (for scale) | $LOAD | | start to \`loading:0\` |
MD
