#!/usr/bin/env bash
# make redis-py: redis-py's own test suite (standalone, RESP2 and RESP3) against a real
# redis-server and against ferrokv-server, one after the other on port 6379 (the port the
# suite's defaults and a few of its tests assume), then the tests that pass on the real
# server and not here. Exit 1 when there is one. Counts go in docs/conformance.md.
#
#   REDIS_PY_SRC  redis-py's source at the tag tested (required; a developer step, as the
#                 Redis suites: `git -C <redis-py clone> archive v5.0.8 | tar -x -C DIR`)
#   REDIS_SERVER  the reference server (default: redis-server, Debian's 7.0.15)
#   PROTOCOLS     default "2 3"
#   VENV          the Python environment for the suite (default: target/redis-py-venv;
#                 made with pinned pytest versions on first use, which needs the network)
#   OUT           where the junit files and logs go (default: a temp directory, kept)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REDIS_PY_SRC:?set REDIS_PY_SRC to redis-py 5.0.8 source tree (docs/conformance.md)}"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
PROTOCOLS=${PROTOCOLS:-"2 3"}
VENV=${VENV:-$PWD/target/redis-py-venv}
OUT=${OUT:-$(mktemp -d /tmp/ferrokv-redis-py.XXXXXX)}
mkdir -p "$OUT"
# The selection of redis-py's standalone CI job, less what needs other servers: modules
# (redis-stack), TLS (stunnel), a replica on 6380, a cluster.
MARKS="not onlycluster and not redismod and not ssl and not replica"

if redis-cli -p 6379 PING >/dev/null 2>&1; then
    echo "redis-py: port 6379 is taken; the suite needs it" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    # The versions redis-py 5.0.8's suite runs with (its async tests use the event_loop
    # fixture that later pytest-asyncio removed).
    "$VENV/bin/pip" install -q "pytest==7.4.4" "pytest-asyncio==0.23.7" "pytest-timeout==2.3.1" \
        "mock==4.0.3" "urllib3<2" packaging ujson numpy
fi
cargo build -q --release -p ferrokv-server

# run NAME BINARY PROTOCOL: start BINARY on 6379 as the suite's docker-compose does
# (DEBUG on, protected mode off), run the suite, stop it.
run() {
    local name=$1 bin=$2 proto=$3 dir
    dir=$(mktemp -d)
    "$bin" --port 6379 --enable-debug-command yes --protected-mode no --save "" --dir "$dir" \
        > "$OUT/$name-server.log" 2>&1 &
    local pid=$! tries=0
    until redis-cli -p 6379 PING 2>/dev/null | grep -q PONG; do
        tries=$((tries + 1))
        if [ "$tries" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "redis-py: $name did not start (see $OUT/$name-server.log)" >&2
            exit 2
        fi
        sleep 0.05
    done
    (cd "$REDIS_PY_SRC" && "$VENV/bin/python" -m pytest --protocol="$proto" -m "$MARKS" \
        -p no:cacheprovider -q --junit-xml="$OUT/$name-resp$proto.xml" > "$OUT/$name-resp$proto.log" 2>&1) || true
    redis-cli -p 6379 SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    echo "$name, RESP$proto: $(tail -n 1 "$OUT/$name-resp$proto.log")"
}

status=0
for proto in $PROTOCOLS; do
    run redis "$REDIS_SERVER" "$proto"
    run ferrokv "$PWD/target/release/ferrokv-server" "$proto"
    python3 - "$OUT/redis-resp$proto.xml" "$OUT/ferrokv-resp$proto.xml" <<'EOF' || status=1
import sys
import xml.etree.ElementTree as ET

def outcomes(path):
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f'{case.get("classname")}::{case.get("name")}'
        kinds = {child.tag for child in case}
        out[name] = "fail" if kinds & {"failure", "error"} else "skip" if "skipped" in kinds else "pass"
    return out

real, ours = outcomes(sys.argv[1]), outcomes(sys.argv[2])
count = lambda o, k: sum(1 for v in o.values() if v == k)
print(f"  passed: redis {count(real, 'pass')}, ferrokv {count(ours, 'pass')}; "
      f"failed: redis {count(real, 'fail')}, ferrokv {count(ours, 'fail')}")
lost = sorted(t for t, v in real.items() if v == "pass" and ours.get(t) != "pass")
for t in lost:
    print(f"  passes on redis, not here: {t}")
sys.exit(1 if lost else 0)
EOF
done
echo "redis-py: logs and junit files in $OUT"
exit "$status"
