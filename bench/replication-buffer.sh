#!/bin/bash
# bench/replication-buffer.sh SERVER PORT: the master's memory while three real Redis
# replicas (redis-server from PATH, on PORT+1..3) wait in a 100-s full resync and 50 MB
# of writes (5,000 SETs of 10 kB) arrive. Prints used_memory's growth, the resident
# size and mem_total_replication_buffers. Needs redis-cli and redis-server on PATH.
BIN=$1; P=$2
D=$(mktemp -d); cd $D
$BIN --port $P --save "" --enable-debug-command yes --repl-diskless-sync-delay 0 --repl-diskless-sync-max-replicas 3 --logfile m.log --daemonize no > /dev/null 2>&1 &
MP=$!
sleep 0.5
redis-cli -p $P debug populate 100 k 16 > /dev/null
redis-cli -p $P config set rdb-key-save-delay 1000000 > /dev/null
redis-cli -p $P config set repl-diskless-sync-delay 5 > /dev/null
for i in 1 2 3; do mkdir r$i; (cd r$i && redis-server --port $((P+i)) --save "" --daemonize yes --logfile r.log); done
sleep 0.5
for i in 1 2 3; do redis-cli -p $((P+i)) replicaof 127.0.0.1 $P > /dev/null; done
for t in $(seq 1 100); do [ "$(redis-cli -p $P info persistence | grep rdb_bgsave_in_progress | tr -d '\r')" = "rdb_bgsave_in_progress:1" ] && break; sleep 0.1; done
sleep 0.5
before=$(redis-cli -p $P info memory | grep '^used_memory:' | cut -d: -f2 | tr -d '\r')
python3 -c "
import sys
v='x'*10240
out=sys.stdout.buffer
for i in range(5000):
    k=f'big:{i}'
    out.write(f'*3\r\n\$3\r\nSET\r\n\${len(k)}\r\n{k}\r\n\${len(v)}\r\n{v}\r\n'.encode())
" | redis-cli -p $P --pipe > /dev/null
sleep 0.5
after=$(redis-cli -p $P info memory | grep '^used_memory:' | cut -d: -f2 | tr -d '\r')
rss=$(grep VmRSS /proc/$MP/status | awk '{print $2}')
bufs=$(redis-cli -p $P info memory | grep '^mem_total_replication_buffers:' | cut -d: -f2 | tr -d '\r')
echo "growth_MB=$(( (after-before)/1048576 )) rss_MB=$((rss/1024)) repl_buffers=${bufs:-n/a}"
for i in 1 2 3; do redis-cli -p $((P+i)) shutdown nosave > /dev/null 2>&1; done
kill $MP; wait $MP 2>/dev/null; cd /; rm -rf $D
