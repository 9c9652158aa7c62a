#!/usr/bin/env bash
# rdbtool diff on two >= 1 GB RDBs written by a real redis-server: BENCH_DIR/big.rdb (made by
# `python3 fixtures/generate.py --bench`, see bench/run.sh) and big-changed.rdb, the same
# dataset loaded into a real redis-server, ~1% of its keys changed with ordinary commands
# (fixtures/diff/mutate.py) and saved again. Prints wall seconds and peak RSS of the diff and
# checks its counts against the changes that were made.
#
#   BENCH_DIR       where the files live (default /tmp/ferrokv-bench)
#   DIFF_FRACTION   fraction of keys changed (default 0.01)
#   REMAKE=1        make big-changed.rdb again even if it exists
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/ferrokv-bench}
A="$BENCH_DIR/big.rdb"
B="$BENCH_DIR/big-changed.rdb"
TOOL=target/release/rdbtool

if [ ! -s "$A" ]; then
    echo "no $A: run bench/run.sh (or python3 fixtures/generate.py --bench $A) first" >&2
    exit 2
fi
if [ ! -s "$B" ] || [ ! -s "$B.changes.json" ] || [ "${REMAKE:-0}" = 1 ]; then
    echo "making $B with a real redis-server (needs ~2.5 GB RAM, about a minute) ..." >&2
    python3 fixtures/diff/mutate.py "$A" "$B" --fraction "${DIFF_FRACTION:-0.01}"
fi
cargo build --release --bins -q
cat "$A" "$B" > /dev/null # warm the page cache, as for every other benchmark here

OUT="$BENCH_DIR/diff.json"
TIMES="$BENCH_DIR/diff.time"
set +e
/usr/bin/time -f "%e s %M KB" -o "$TIMES" "$TOOL" diff "$A" "$B" --format json > "$OUT"
CODE=$?
set -e
echo "rdbtool diff $A $B: exit $CODE, $(tail -1 "$TIMES")"
python3 - "$OUT" "$B.changes.json" "$CODE" <<'EOF'
import json, sys
out, made, code = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
found, expect = out["counts"], made["expect"]
print("keys: A %d, B %d" % (found["keys_a"], found["keys_b"]))
ok = code == 1
for k in ["keys_differ", "only_in_a", "only_in_b", "type_changed", "value_changed", "ttl_changed"]:
    mark = "ok" if found[k] == expect[k] else "MISMATCH"
    ok &= found[k] == expect[k]
    print("  %-14s found %7d  made %7d  %s" % (k, found[k], expect[k], mark))
print("keys shown: %d, not shown: %d" % (len(out["keys"]), out["keys_not_shown"]))
sys.exit(0 if ok else 1)
EOF
