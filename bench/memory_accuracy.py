#!/usr/bin/env python3
"""How far each tool's per-key memory estimate is from the server's own answer.

A real redis-server writes a corpus of every type and encoding, SAVEs it, is restarted on
the file (so the keys are as a load builds them), and answers `MEMORY USAGE key SAMPLES 0`
for every key and INFO's used_memory_dataset. Each tool then estimates the same file:
rdbtool memory (--format jsonl), HDT3213/rdb (`-c memory`) and redis-rdb-tools
(`rdb -c memory`) when given. Prints a markdown table: keys within 10% of MEMORY USAGE,
the median and worst error, the total against used_memory_dataset, and per type the
median error.

    python3 bench/memory_accuracy.py --redis-server redis-server --allocator jemalloc-q16 \
        [--hdt PATH/rdb] [--rdbtools PATH/rdb] [--redis-version 7.0]

Standard library only. Nothing here is committed output: run it, read the table.
"""

import argparse
import csv
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def resp(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 16)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise ValueError(line)

    def pipeline(self, cmds):
        for i in range(0, len(cmds), 500):
            part = cmds[i:i + 500]
            self.s.sendall(b"".join(resp(c) for c in part))
            for _ in part:
                self.reply()

    def call(self, *args):
        self.s.sendall(resp(args))
        return self.reply()


def corpus(rng, field_ttls):
    cmds = []
    for i in range(200):
        cmds.append(["SET", f"str:int:{i}", str(i * 100003)])
        cmds.append(["SET", f"str:emb:{i}", "e" * rng.randint(1, 44)])
        cmds.append(["SET", f"str:raw:{i}", "r" * rng.randint(45, 5000)])
    for i in range(60):
        n = rng.choice([3, 40, 300, 3000])
        cmds.append(["RPUSH", f"list:{i}"] + [f"item-{j}-" + "z" * rng.randint(0, 30) for j in range(n)])
        n = rng.choice([3, 60, 700])
        h = ["HSET", f"hash:{i}"]
        for j in range(n):
            h += [f"field:{j}", "v" * rng.randint(1, 60)]
        cmds.append(h)
        n = rng.choice([5, 50, 300])
        z = ["ZADD", f"zset:{i}"]
        for j in range(n):
            z += [str(rng.randint(0, 10**6) / 7), f"member:{j}:" + "m" * rng.randint(0, 20)]
        cmds.append(z)
    for i in range(40):
        n = rng.choice([5, 600])
        cmds.append(["SADD", f"iset:{i}"] + [str(rng.randint(0, 10**9)) for _ in range(n)])
        n = rng.choice([5, 300])
        cmds.append(["SADD", f"sset:{i}"] + [f"m:{j}:" + "s" * rng.randint(0, 20) for j in range(n)])
    for i in range(30):
        for j in range(rng.randint(1, 200)):
            cmds.append(["XADD", f"stream:{i}", "*", "f", str(j), "g", "x" * rng.randint(0, 40)])
        if i % 3 == 0:
            cmds.append(["XGROUP", "CREATE", f"stream:{i}", "g", "0"])
            cmds.append(["XREADGROUP", "GROUP", "g", "c1", "COUNT", "5", "STREAMS", f"stream:{i}", ">"])
    for i in range(50):
        cmds.append(["EXPIRE", f"str:raw:{i}", "100000"])
    if field_ttls:
        for i in range(10):
            cmds.append(["HEXPIRE", f"hash:{i}", "100000", "FIELDS", "1", "field:0"])
    return cmds


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(server, workdir):
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--dir", workdir, "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            c = Conn(port)
            if c.call("PING") == b"PONG":
                return proc, c
        except (OSError, EOFError, ValueError):
            pass
        time.sleep(0.05)
    raise SystemExit(f"{server} did not start")


def truth(server, field_ttls, workdir):
    proc, c = start(server, workdir)
    c.pipeline(corpus(random.Random(7), field_ttls))
    c.call("SAVE")
    proc.terminate()
    proc.wait()
    proc, c = start(server, workdir)  # loads dump.rdb
    keys = c.call("KEYS", "*")
    usage = {k: int(c.call("MEMORY", "USAGE", k, "SAMPLES", "0")) for k in keys}
    types = {k: c.call("TYPE", k).decode() + " " + c.call("OBJECT", "ENCODING", k).decode() for k in keys}
    info = c.call("INFO", "memory").decode()
    dataset = int(next(l.split(":")[1] for l in info.splitlines() if l.startswith("used_memory_dataset:")))
    version = c.call("INFO", "server").decode()
    version = next(l.split(":")[1] for l in version.splitlines() if l.startswith("redis_version:"))
    proc.terminate()
    proc.wait()
    return usage, types, dataset, version.strip()


def ours(rdbtool, rdb, allocator, redis_version):
    args = [rdbtool, "memory", rdb, "--format", "jsonl", "--allocator", allocator]
    if redis_version:
        args += ["--redis-version", redis_version]
    out = subprocess.run(args, capture_output=True, check=True).stdout.decode()
    est, alloc = {}, 0
    for line in out.splitlines():
        v = json.loads(line)
        est[v["key"].encode()] = v["bytes"]
        alloc += v["allocated"]
    return est, alloc, None


def hdt(binary, rdb, workdir):
    out = os.path.join(workdir, "hdt.csv")
    r = subprocess.run([binary, "-c", "memory", "-o", out, rdb], capture_output=True)
    err = (r.stdout + r.stderr).decode().strip().splitlines()
    est = {}
    if os.path.exists(out):
        with open(out, newline="") as f:
            for row in csv.DictReader(f):
                est[row["key"].encode()] = int(row["size"])
    problem = err[0] if err and ("rror" in err[0] or "panic" in err[0]) else None
    return est, sum(est.values()), problem


def rdbtools(binary, rdb, workdir):
    out = os.path.join(workdir, "rdbtools.csv")
    r = subprocess.run([binary, "-c", "memory", "-f", out, rdb], capture_output=True)
    est = {}
    if r.returncode == 0 and os.path.exists(out):
        with open(out, newline="") as f:
            for row in csv.DictReader(f):
                est[row["key"].encode()] = int(row["size_in_bytes"])
    problem = None if r.returncode == 0 else r.stderr.decode().strip().splitlines()[-1]
    return est, sum(est.values()), problem


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--allocator", default="jemalloc", help="rdbtool's --allocator for that server")
    ap.add_argument("--redis-version", help="rdbtool's --redis-version (default: the file's)")
    ap.add_argument("--rdbtool", default="target/release/rdbtool")
    ap.add_argument("--hdt", help="HDT3213/rdb's binary")
    ap.add_argument("--rdbtools", help="redis-rdb-tools' rdb script")
    ap.add_argument("--field-ttls", action="store_true", help="hash field TTLs (Redis 7.4+)")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="memory-accuracy-")
    try:
        usage, types, dataset, version = truth(a.redis_server, a.field_ttls, workdir)
        rdb = os.path.join(workdir, "dump.rdb")
        tools = [("rdbtool memory", ours(a.rdbtool, rdb, a.allocator, a.redis_version))]
        if a.hdt:
            tools.append(("HDT3213/rdb -c memory", hdt(a.hdt, rdb, workdir)))
        if a.rdbtools:
            tools.append(("redis-rdb-tools -c memory", rdbtools(a.rdbtools, rdb, workdir)))
        print(f"Redis {version} ({a.redis_server}), {len(usage)} keys, used_memory_dataset {dataset}\n")
        print("| tool | keys estimated | within 10% of MEMORY USAGE | median error | worst error | sum vs used_memory_dataset | note |")
        print("|---|---:|---:|---:|---:|---:|---|")
        per_type = {}
        for name, (est, total, problem) in tools:
            errs, by = [], {}
            for k, real in usage.items():
                if k in est and real > 0:
                    e = (est[k] - real) / real
                    errs.append(e)
                    by.setdefault(types[k], []).append(e)
            per_type[name] = by
            if errs:
                within = sum(abs(e) <= 0.10 for e in errs)
                med = statistics.median(abs(e) for e in errs)
                worst = max(errs, key=abs)
                print(f"| {name} | {len(errs)}/{len(usage)} | {within} ({within * 100 / len(usage):.1f}%) | "
                      f"{med * 100:.1f}% | {worst * 100:+.1f}% | {(total - dataset) * 100 / dataset:+.1f}% | {problem or ''} |")
            else:
                print(f"| {name} | 0/{len(usage)} | — | — | — | — | {problem or 'no output'} |")
        print("\nmedian error per type and encoding:\n")
        names = [n for n, _ in tools]
        print("| type encoding | keys | " + " | ".join(names) + " |")
        print("|---|---:|" + "---:|" * len(names))
        for t in sorted(set(types.values())):
            n = sum(1 for v in types.values() if v == t)
            cells = []
            for name in names:
                e = per_type[name].get(t)
                cells.append(f"{statistics.median(e) * 100:+.1f}%" if e else "—")
            print(f"| {t} | {n} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
