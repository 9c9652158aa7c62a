#!/usr/bin/env bash
# make conformance-spawned: units of Redis's own TCL suite in its normal (spawned) mode,
# the suite starting ferrokv-server itself as `src/redis-server` (a small wrapper that
# adds --redis-version). Units tagged external:skip run only this way.
#
#   REDIS_SRC  an extracted Redis source tree of the tag to test against (required)
#   VERSION    the --redis-version ferrokv stands in as (default 7.4)
#   UNITS      units to run (default: unit/type/hash-field-expire)
#   CLI        redis-cli (and redis-benchmark/check-*) suffix in ../shared/bin (default 7.4.1;
#              `system` takes them from PATH, Debian's 7.0)
#   ARGS       more runtest arguments (`--baseport 31000` beside another run)
#   TLS=1      run the suite over TLS (`runtest --tls`, certificates from the tree's
#              utils/gen-test-certs.sh; needs openssl, Tcl's tls package and a redis-cli
#              built with TLS, such as Debian's: CLI=system)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REDIS_SRC:?set REDIS_SRC to an extracted redis source tree (docs/conformance.md)}"
VERSION=${VERSION:-7.4}
CLI=${CLI:-7.4.1}
UNITS=${UNITS:-unit/type/hash-field-expire}
if [ "$CLI" != system ]; then
    BIN=$(cd ../shared/bin 2>/dev/null && pwd) || { echo "conformance-spawned: ../shared/bin not found" >&2; exit 2; }
fi
cargo build -q --release -p ferrokv-server
SERVER=$(pwd)/target/release/ferrokv-server
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$REDIS_SRC/tests" "$REDIS_SRC/runtest" "$WORK/"
mkdir "$WORK/src"
# The version comes on stdin (`-`, read after the config file and before the options), so
# the suite's own arguments reach the server exactly as it wrote them.
cat > "$WORK/src/redis-server" <<EOF
#!/bin/sh
exec $SERVER "\$@" - <<CONF
redis-version $VERSION
CONF
EOF
chmod +x "$WORK/src/redis-server"
for tool in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
    if [ "$CLI" = system ]; then
        ln -s "$(command -v "$tool")" "$WORK/src/$tool"
    else
        target=$BIN/$tool-$CLI
        # redis-check-* may be stored as a text file naming the server binary it links to
        # (the server picks its role from the name it is started under).
        [ -x "$target" ] || target=$BIN/$(tr -d '\n' < "$target")
        ln -s "$target" "$WORK/src/$tool"
    fi
done
args=()
for u in $UNITS; do args+=(--single "$u"); done
cd "$WORK"
if [ -n "${TLS:-}" ]; then
    mkdir -p utils && cp "$REDIS_SRC/utils/gen-test-certs.sh" utils/
    ./utils/gen-test-certs.sh >/dev/null 2>&1
    args+=(--tls)
fi
# shellcheck disable=SC2086
./runtest --clients 1 ${TAGS:+--tags "$TAGS"} "${args[@]}" ${ARGS:-}
