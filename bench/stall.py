#!/usr/bin/env python3
"""Longest event-loop stall while a background save starts.

One connection sends PING in a tight loop and records every round trip; after a warm-up a
second connection sends the trigger command (BGSAVE by default) and the loop keeps going
until the server reports the job done. Prints the longest round trip, the round trip
percentiles, and INFO's latest_fork_usec.

    bench/stall.py PORT [BGSAVE|BGREWRITEAOF|SYNC] [--seconds N]

SYNC: a replica's full resync, as `redis-cli --rdb` takes one (the job ends when it has
the whole RDB).
"""
import socket
import subprocess
import sys
import threading
import time


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def command(s, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    return read_reply(s)


def read_reply(s):
    buf = b""
    while not buf.endswith(b"\r\n"):
        buf += s.recv(1)
    if buf[:1] == b"$":
        n = int(buf[1:-2])
        if n < 0:
            return None
        data = b""
        while len(data) < n + 2:
            data += s.recv(n + 2 - len(data))
        return data[:-2]
    return buf[:-2]


def info_field(s, section, name):
    text = command(s, "INFO", section).decode()
    for line in text.split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return None


def main():
    sys.setswitchinterval(0.0005)
    port = int(sys.argv[1])
    trigger = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else "BGSAVE"
    seconds = 30.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    pinger, admin = connect(port), connect(port)
    ping = b"*1\r\n$4\r\nPING\r\n"
    rtts = []
    start = time.monotonic()
    triggered_at = None
    th = None
    done_flag = "rdb_bgsave_in_progress" if trigger.upper() == "BGSAVE" else "aof_rewrite_in_progress"
    while time.monotonic() - start < seconds:
        t0 = time.perf_counter()
        pinger.sendall(ping)
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += pinger.recv(64)
        rtts.append(time.perf_counter() - t0)
        if triggered_at is None and time.monotonic() - start > 0.5:
            # From another thread, so the ping in flight meets the stall.
            def fire():
                t = time.perf_counter()
                if trigger.upper() == "SYNC":
                    subprocess.run(["redis-cli", "-p", str(port), "--rdb", "/tmp/stall-sync.rdb"], capture_output=True)
                    print("trigger: redis-cli --rdb took %.2f s" % (time.perf_counter() - t))
                    return
                r = command(admin, trigger).decode()
                print("trigger: %s (reply after %.2f ms)" % (r, (time.perf_counter() - t) * 1000))
            th = threading.Thread(target=fire)
            th.start()
            triggered_at = len(rtts)
        elif th is not None and th.is_alive():
            continue
        elif triggered_at is not None and trigger.upper() == "SYNC":
            break
        elif triggered_at is not None and len(rtts) % 200 == 0:
            if info_field(admin, "persistence", done_flag) == "0":
                break
    before = sorted(rtts[:triggered_at])
    during = sorted(rtts[triggered_at:])
    ms = lambda x: "%.2f ms" % (x * 1000)
    print("pings before trigger: %d, max %s" % (len(before), ms(before[-1])))
    print(
        "pings during job: %d, max %s, p99 %s, p999 %s, job took %.2f s"
        % (
            len(during),
            ms(during[-1]),
            ms(during[int(len(during) * 0.99)]),
            ms(during[int(len(during) * 0.999)]),
            sum(rtts[triggered_at:]),
        )
    )
    print("latest_fork_usec:", info_field(admin, "stats", "latest_fork_usec"))


if __name__ == "__main__":
    main()
