#!/usr/bin/env python3
"""RESP commands for bench/aof.sh, written to stdout for `redis-cli --pipe`.

    python3 bench/aof_gen.py --phase 1 --mb 1100 --seed 1 | redis-cli -p PORT --pipe

Mixed types in databases 0 and 1: strings (short, long, integers with INCRBY), lists
(RPUSH), hashes (HSET), sets (SADD, some all-integer), sorted sets (ZADD), a TTL far in
the future on some keys (EXPIRE, logged as PEXPIREAT), a few MULTI/EXEC blocks. Phase 2
writes new keys and also updates phase 1's (appends, field and member updates, DEL).
Stops once --mb megabytes of RESP have been written. Deterministic for a seed.
"""
import argparse
import random
import sys

ALPHA = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", type=int, required=True)
    ap.add_argument("--mb", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed * 1000 + a.phase)
    pool = bytes(rng.choice(ALPHA) for _ in range(1 << 16)) * 4
    plen = len(pool) - 4096

    def blob(lo, hi):
        n = rng.randint(lo, hi)
        o = rng.randrange(plen)
        return pool[o:o + n]

    def cmd(*args):
        parts = [b"*%d\r\n" % len(args)]
        for x in args:
            parts.append(b"$%d\r\n%s\r\n" % (len(x), x))
        return b"".join(parts)

    out = sys.stdout.buffer
    limit = a.mb * 1_000_000
    written = 0
    buf = []
    n = 0
    p = b"%d" % a.phase
    db = 0
    while written < limit:
        n += 1
        if n % 50000 == 0:
            db = 1 - db
            buf.append(cmd(b"SELECT", b"%d" % db))
        kind = rng.random()
        key_id = b"%s:%d" % (p, n)
        if kind < 0.35:
            k = b"str:" + key_id
            buf.append(cmd(b"SET", k, blob(20, 400)))
        elif kind < 0.42:
            k = b"int:" + key_id
            buf.append(cmd(b"SET", k, b"%d" % rng.randrange(1 << 40)))
            buf.append(cmd(b"INCRBY", k, b"%d" % rng.randrange(1000)))
        elif kind < 0.45:
            k = b"big:" + key_id
            buf.append(cmd(b"SET", k, blob(2000, 8000)))
        elif kind < 0.60:
            k = b"list:" + key_id
            els = [blob(10, 80) for _ in range(rng.randint(5, 60))]
            buf.append(cmd(b"RPUSH", k, *els))
        elif kind < 0.75:
            k = b"hash:" + key_id
            fv = []
            for i in range(rng.randint(3, 80)):
                fv.append(b"f%d" % i)
                fv.append(blob(5, 60))
            buf.append(cmd(b"HSET", k, *fv))
        elif kind < 0.85:
            k = b"set:" + key_id
            if rng.random() < 0.4:
                ms = [b"%d" % rng.randrange(1 << 30) for _ in range(rng.randint(5, 200))]
            else:
                ms = [blob(8, 30) for _ in range(rng.randint(5, 100))]
            buf.append(cmd(b"SADD", k, *ms))
        else:
            k = b"zset:" + key_id
            sm = []
            for _ in range(rng.randint(5, 100)):
                sm.append(b"%.3f" % (rng.random() * 1e6))
                sm.append(blob(6, 30))
            buf.append(cmd(b"ZADD", k, *sm))
        if rng.random() < 0.1:
            buf.append(cmd(b"EXPIRE", k, b"%d" % rng.randint(10_000_000, 20_000_000)))
        if a.phase == 2 and rng.random() < 0.2:
            # Updates to phase 1's keys (which may not exist with that exact id: then
            # they are new keys, which is fine).
            j = b"1:%d" % rng.randrange(1, n + 1)
            r = rng.random()
            if r < 0.3:
                buf.append(cmd(b"RPUSH", b"list:" + j, blob(10, 80), blob(10, 80)))
            elif r < 0.6:
                buf.append(cmd(b"HSET", b"hash:" + j, b"f0", blob(5, 60), b"new", blob(5, 60)))
            elif r < 0.8:
                buf.append(cmd(b"ZADD", b"zset:" + j, b"%.3f" % rng.random(), blob(6, 30)))
            elif r < 0.9:
                buf.append(cmd(b"DEL", b"str:" + j))
            else:
                buf.append(cmd(b"MULTI"))
                buf.append(cmd(b"INCR", b"counter:%d" % rng.randrange(1000)))
                buf.append(cmd(b"SADD", b"set:" + j, blob(8, 30)))
                buf.append(cmd(b"EXEC"))
        if len(buf) >= 2000:
            chunk = b"".join(buf)
            out.write(chunk)
            written += len(chunk)
            buf = []
    if buf:
        out.write(b"".join(buf))
    out.flush()


if __name__ == "__main__":
    main()
