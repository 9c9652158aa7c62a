#!/usr/bin/env bash
# make conformance: Redis's own TCL test suite (7.0.15, external mode) against
# ferrokv-server, in the "minimal" profile of ../shared/conformance.md. Prints the per-unit
# table that docs/conformance.md records; exits non-zero when a test fails.
#
#   REDIS_SRC  the extracted suite (required; a developer step, see docs/conformance.md)
#   UNITS      units to run (default: the issue's 14)
#   PROFILE    minimal (default) | nodebug | full
#   VERSION    the --redis-version ferrokv stands in as (default: its own, 7.0); with
#              REDIS_SRC a 7.4.1 tree and VERSION=7.4, Redis 7.4.1's suite
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REDIS_SRC:?set REDIS_SRC to an extracted redis 7.0.15 (or 7.4.1) tree (docs/conformance.md)}"
RUNNER=${RUNNER:-../shared/tools/run-redis-tests.sh}
[ -x "$RUNNER" ] || { echo "conformance: $RUNNER not found (../shared beside the checkout)" >&2; exit 2; }
UNITS=${UNITS:-"unit/type/string unit/type/incr unit/type/list unit/type/hash unit/type/set unit/type/zset
 unit/expire unit/keyspace unit/multi unit/pubsub unit/scan unit/sort unit/info-command unit/scripting"}
case "${PROFILE:-minimal}" in
    minimal)
        export TAGS="-slow -needs:debug -needs:repl -needs:config-maxmemory -needs:save -needs:reset -needs:config-resetstat -needs:pfdebug -needs:latency -needs:local-process"
        export EXTRA="--ignore-encoding --ignore-digest" ;;
    nodebug) export TAGS="-slow -needs:debug" EXTRA="" ;;
    full) export TAGS="-slow" EXTRA="" ;;
    *) echo "conformance: unknown PROFILE" >&2; exit 2 ;;
esac
cargo build -q --release -p ferrokv-server
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
# DEBUG on, as Redis's own test configuration (tests/assets/default.conf) has it.
target/release/ferrokv-server --port "$PORT" --save "" --appendonly no --enable-debug-command yes --dir "$WORK" \
    ${VERSION:+--redis-version "$VERSION"} > "$WORK/server.log" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
until redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG; do sleep 0.05; done
export LOGDIR=${LOGDIR:-$WORK/logs}
# shellcheck disable=SC2086
"$RUNNER" 127.0.0.1 "$PORT" $UNITS
