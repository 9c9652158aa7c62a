#!/usr/bin/env bash
# Installs what tests and benchmarks need from Debian: redis-server and redis-tools
# (redis-cli, redis-check-rdb), openssl, python3 for the layering check, and chromium (the
# memory report's HTML page is opened headless in a test). Safe to run repeatedly.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-check-rdb >/dev/null 2>&1 || need+=(redis-tools)
command -v openssl >/dev/null 2>&1 || need+=(openssl)   # certificates for the TLS tests
[ -x /usr/bin/time ] || need+=(time)          # peak RSS in make bench
command -v python3 >/dev/null 2>&1 || need+=(python3)   # make lint's layering check
if [ ${#need[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    # The package starts a service on 6379; tests start their own servers.
    $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
if ! command -v chromium >/dev/null 2>&1; then   # rdbtool memory --html, opened headless
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# DuckDB's Python package reads `rdbtool convert --to parquet`'s files in a test
# (tools/tests/parquet.rs): a venv under target/, left out of git.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/target/duckdb-venv"
if ! "$VENV/bin/python" -c 'import duckdb' >/dev/null 2>&1; then
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        SUDO=""
        [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    fi
    mkdir -p "$ROOT/target"
    python3 -m venv "$VENV" && "$VENV/bin/pip" install -q duckdb \
        || echo "install-deps: no duckdb (the Parquet test skips its DuckDB part)" >&2
fi
redis-server --version
