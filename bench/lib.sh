# Shared by the bench scripts (sourced).

# best_of N CMD...: prints "seconds peak_rss_kb" of the fastest of N runs.
best_of() {
    local n=$1 best="" line tf
    shift
    tf=$(mktemp)
    for _ in $(seq "$n"); do
        /usr/bin/time -f "%e %M" -o "$tf" "$@" > /dev/null 2>/dev/null || true
        line=$(tail -1 "$tf")
        if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN{exit !(a<b)}'; then best=$line; fi
    done
    rm -f "$tf"
    echo "$best"
}
# MB/s of $SIZE bytes in $1 seconds; KiB to MiB.
mbps() { awk -v s="$SIZE" -v t="$1" 'BEGIN{printf "%.0f", s/1e6/t}'; }
mib() { awk -v k="$1" 'BEGIN{printf "%.0f", k/1024}'; }
