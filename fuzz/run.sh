#!/usr/bin/env bash
# Fuzz the RDB reader, the deep verifier and the three dump writers, the engine's
# commands and the AOF loader (README.md here).
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_RUNS      executions per target instead (the campaign of docs/reliability.md: 10000000)
#   FUZZ_TARGETS   which targets, in order (default: every target,
#                  "rdb rdb_body commands aof resp dump config replies")
#   FUZZ_MAX_LEN   largest input libFuzzer makes, in bytes (default 8192)
#   FUZZ_ARGS      more libFuzzer flags, e.g. "-seed=1 -dict=..."
#   FUZZ_SANITIZER none (default) or address: AddressSanitizer, ~8x slower
# Works on the stable toolchain: no sanitizer is needed, as the code under test is safe
# Rust, so the bugs to find are panics, aborts, hangs and runaway allocations. A sanitizer
# needs -Zsanitizer, which stable takes only with RUSTC_BOOTSTRAP=1 (set here for it).
# One fuzzing process at a time; builds use one job unless CARGO_BUILD_JOBS says more.
# A crash is copied to fuzz/regressions/ (replayed by `cargo test -p ferrokv-tools
# --test fuzz_seeds`; commands and aof crashes go to regressions/<target>/, replayed by
# `cargo test -p ferrokv --test fuzz_seeds`) and the script exits 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cd "$here"

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
FUZZ_TARGETS="${FUZZ_TARGETS:-rdb rdb_body commands aof resp dump config replies}"
FUZZ_RUNS="${FUZZ_RUNS:-}"
FUZZ_MAX_LEN="${FUZZ_MAX_LEN:-8192}"
FUZZ_ARGS="${FUZZ_ARGS:-}"
FUZZ_SANITIZER="${FUZZ_SANITIZER:-none}"
fuzz_opts=(--sanitizer "$FUZZ_SANITIZER")
target_dir=target
if [ "$FUZZ_SANITIZER" != none ]; then
    export RUSTC_BOOTSTRAP=1
    # Its own build directory, so switching back and forth does not rebuild everything.
    target_dir="target/sanitizer-$FUZZ_SANITIZER"
    fuzz_opts+=(--target-dir "$target_dir")
fi
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# The starting corpus: the committed RDB fixtures, whole and cut into one seed per record;
# the vs_redis scripts for commands; fuzz/seeds/aof/ (AOF files and manifests written by
# redis-server 7.0) for aof. corpus/ is git-ignored; what the fuzzer adds there is kept
# for the next run.
echo "== seeding corpus/"
cargo build --release --quiet --example seeds
for t in $FUZZ_TARGETS; do
    case "$t" in
        commands | resp | dump) inputs=("$root"/engine/tests/scripts/*.redis) ;;
        aof) inputs=(seeds/aof/*) ;;
        config) inputs=("$root"/server/ferrokv.conf) ;;
        replies)
            mkdir -p corpus/replies
            printf '+OK\r\n-MOVED 12 127.0.0.1:7001\r\n:3\r\n$-1\r\n*1\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n' \
                > corpus/replies/seed
            continue
            ;;
        *) inputs=("$root"/fixtures/rdb/redis-7.0/*.rdb) ;;
    esac
    ./target/release/examples/seeds "$t" "corpus/$t" "${inputs[@]}"
done

# Build every target first, then run the binaries as built: what is fuzzed is one
# snapshot of the sources, even while someone edits them (`cargo fuzz run` would rebuild
# before each target).
echo "== building fuzz targets (sanitizer: $FUZZ_SANITIZER)"
cargo fuzz build "${fuzz_opts[@]}"
bin_dir="$target_dir/$(rustc -vV | sed -n 's/^host: //p')/release"

status=0
for t in $FUZZ_TARGETS; do
    if [ -n "$FUZZ_RUNS" ]; then
        limit=(-runs="$FUZZ_RUNS")
        echo "== fuzzing $t for $FUZZ_RUNS executions"
    else
        limit=(-max_total_time="$FUZZ_SECONDS")
        echo "== fuzzing $t for ${FUZZ_SECONDS}s"
    fi
    log="$(mktemp)"
    rm -rf "artifacts/$t"
    mkdir -p "artifacts/$t"
    dict=()
    if [ "$t" = commands ]; then dict=(-dict=dicts/commands.dict); fi
    set +e
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    "$bin_dir/$t" -artifact_prefix="artifacts/$t/" "corpus/$t" "${dict[@]}" \
        "${limit[@]}" -max_len="$FUZZ_MAX_LEN" -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 $FUZZ_ARGS 2>&1 | tee "$log" \
        | grep --line-buffered -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)|NEW_FUNC|# Uses: |dictionary\. #|^stat::'
    rc="${PIPESTATUS[0]}"
    set -e
    grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|Done )' "$log" \
        | sed "s/^/$t: /" || true
    rm -f "$log"
    if [ "$rc" -ne 0 ]; then
        status=1
        echo "!! $t failed (exit $rc)"
        mkdir -p regressions
        for a in artifacts/"$t"/*; do
            [ -f "$a" ] || continue
            if [ "$t" = resp ] || [ "$t" = config ] || [ "$t" = replies ]; then
                mkdir -p "regressions/$t"
                dest="regressions/$t/$(basename "$a")"
                cp "$a" "$dest"
                echo "!! reproducer: fuzz/$dest; replay: (cd fuzz && cargo fuzz run --sanitizer none $t $dest)"
                continue
            fi
            if [ "$t" = commands ] || [ "$t" = aof ] || [ "$t" = dump ]; then
                # Engine inputs: replayed by engine/tests/fuzz_seeds.rs.
                mkdir -p "regressions/$t"
                dest="regressions/$t/$(basename "$a")"
                cp "$a" "$dest"
                echo "!! reproducer: fuzz/$dest ($(wc -c <"$dest") bytes):"
                od -A d -c "$dest" | head -n 16 || true
                echo "!! replay: (cd fuzz && RUST_BACKTRACE=1 cargo fuzz run --sanitizer none $t $dest)"
                echo "!!     or: cargo test -p ferrokv --test fuzz_seeds"
                continue
            fi
            # regressions/ holds whole RDB files: rdb_body's input gets the magic it was
            # run with (ferrokv_fuzz::with_magic), so every file replays with target rdb.
            dest="regressions/$t-$(basename "$a").rdb"
            if [ "$t" = rdb_body ]; then
                first="$(od -A n -t u1 -N 1 "$a" | tr -d ' ')"
                if [ -n "$first" ] && [ $((first % 2)) -eq 1 ]; then magic=VALKEY080; else magic=REDIS0012; fi
                { printf '%s' "$magic"; tail -c +2 "$a"; } >"$dest"
            else
                cp "$a" "$dest"
            fi
            echo "!! reproducer: fuzz/$dest ($(wc -c <"$dest") bytes):"
            od -A d -t x1 "$dest" | head -n 16 || true
            echo "!! replay: (cd fuzz && RUST_BACKTRACE=1 cargo fuzz run --sanitizer none rdb $dest)"
            echo "!!     or: cargo test --release -p ferrokv-tools --test fuzz_seeds"
        done
    fi
done
exit "$status"
