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

# A redis-server a script starts ($RPID, on $PORT) and its scratch directory ($WORK): both
# go on exit (`trap cleanup EXIT`).
RPID=""
cleanup() {
    if [ -n "$RPID" ]; then kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# info FIELD [SECTION]: a field of the server's INFO (section persistence by default).
info() { redis-cli -p "$PORT" INFO "${2:-persistence}" | tr -d '\r' | awk -F: -v k="$1" '$1==k{print $2}'; }
stop_server() {
    redis-cli -p "$PORT" SHUTDOWN NOSAVE > /dev/null 2>&1 || true
    wait "$RPID" 2>/dev/null || true
    RPID=""
}
wait_loaded() {
    until redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG; do sleep 0.05; done
    while [ "$(info loading)" = 1 ]; do sleep 0.05; done
}
# start_server DIR ARGS...: a redis-server with appendonly yes on DIR, once loaded.
start_server() { # dir, extra args...
    local dir=$1
    shift
    PORT=$(free_port)
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes \
        --appendfsync no --auto-aof-rewrite-percentage 0 --logfile "$dir/redis.log" "$@" &
    RPID=$!
    wait_loaded
}
