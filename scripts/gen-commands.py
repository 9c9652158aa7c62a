#!/usr/bin/env python3
"""Generate engine/src/command/catalog.json: every command and subcommand of every server
version ferrokv speaks, from each version's own facts.

    python3 scripts/gen-commands.py \
        --json redis-7.0=/path/to/redis-7.0.15 --json redis-7.2=/path/to/redis-7.2.6 \
        --json redis-7.4=/path/to/redis-7.4.1 --json valkey-7.2=/path/to/valkey-7.2.7 \
        --json valkey-8.0=/path/to/valkey-8.0.1 \
        --server redis-6.2=../shared/bin/redis-server-6.2.16

`--json` names a source tree whose `src/commands/*.json` describe that version (Redis
7.0 and later, Valkey). `--server` names a real server binary of a version without them
(Redis 6.2): it is started on a free loopback port and asked `COMMAND`; its commands get
the documentation of the same command in the oldest JSON version, and a JSON subcommand
belongs to it when its container does and it was added (`since`) in that version or
before. Sentinel-only commands are left out.

The output lists each command once per set of versions where its facts are the same:
`{"versions": [...], "commands": [{"name", "container", "in": [versions], "arity", ...}]}`
with names in lower case. The sources (Redis's and Valkey's trees) are read, never copied
into the project: only the facts land in the catalog.
"""

import argparse
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ORDER = ["redis-6.2", "redis-7.0", "redis-7.2", "redis-7.4", "valkey-7.2", "valkey-8.0"]

# The facts a command carries into the catalog (the C function names are left behind).
FIELDS = [
    "summary", "since", "group", "complexity", "arity", "command_flags", "acl_categories",
    "key_specs", "doc_flags", "deprecated_since", "replaced_by", "history", "command_tips",
    "arguments", "reply_schema",
]


def from_json_tree(root):
    """(container or None, name) -> facts, for one version's commands/*.json."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "src", "commands", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        for name, v in doc.items():
            if "ONLY_SENTINEL" in v.get("command_flags", []):
                continue
            container = v.get("container")
            facts = {k: v[k] for k in FIELDS if k in v}
            if "get_keys_function" in v:
                facts["movable_keys"] = True
            key = (container.lower() if container else None, name.lower())
            out[key] = facts
    return out


def resp_read(f):
    line = f.readline()
    if not line:
        raise EOFError
    t, rest = line[:1], line[1:-2]
    if t in (b"+", b"-"):
        return rest.decode()
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [resp_read(f) for _ in range(n)]
    raise ValueError(line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def from_server(binary):
    """(None, name) -> facts from a real server's COMMAND reply (Redis 6.2's shape)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen([binary, "--port", str(port), "--save", "", "--dir", d],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    s = socket.create_connection(("127.0.0.1", port))
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                sys.exit(f"{binary} did not start")
            s.sendall(b"*1\r\n$7\r\nCOMMAND\r\n")
            reply = resp_read(s.makefile("rb"))
        finally:
            p.terminate()
            p.wait()
    out = {}
    for c in reply:
        name, arity, flags, first, last, step, acl = c[:7]
        facts = {
            "arity": arity,
            "command_flags": sorted(f.upper() for f in flags if f != "movablekeys"),
            "acl_categories": sorted(a.lstrip("@").upper() for a in acl),
            "legacy_key_range": [first, last, step],
        }
        if "movablekeys" in flags:
            facts["movable_keys"] = True
        out[(None, name.lower())] = facts
    return out


def since_at_most(since, version):
    """Whether `since` (x.y.z) is at or before the major.minor `version`."""
    def parts(v):
        return [int(x) for x in v.split(".")[:2]]
    return parts(since) <= parts(version)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="append", default=[], metavar="VERSION=TREE")
    ap.add_argument("--server", action="append", default=[], metavar="VERSION=BINARY")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "engine", "src", "command", "catalog.json"))
    args = ap.parse_args()
    per_version = {}
    for spec in args.json:
        v, root = spec.split("=", 1)
        per_version[v] = from_json_tree(root)
    json_versions = [v for v in ORDER if v in per_version]
    if not json_versions:
        sys.exit("at least one --json version is needed")
    for spec in args.server:
        v, binary = spec.split("=", 1)
        legacy = from_server(binary)
        # Documentation from the oldest JSON version; subcommands added by then.
        docs = per_version[json_versions[0]]
        number = v.split("-", 1)[1]
        merged = {}
        for (container, name), facts in legacy.items():
            doc = docs.get((None, name), {})
            merged[(None, name)] = {**{k: doc[k] for k in FIELDS if k in doc and k not in facts}, **facts}
        for (container, name), doc in docs.items():
            if container and (None, container) in legacy and since_at_most(doc.get("since", "99.0"), number):
                merged[(container, name)] = doc
        per_version[v] = merged
    versions = [v for v in ORDER if v in per_version]
    # One entry per distinct set of facts.
    entries = {}
    for v in versions:
        for (container, name), facts in per_version[v].items():
            blob = json.dumps(facts, sort_keys=True)
            entries.setdefault((container or "", name, blob), []).append(v)
    commands = []
    for (container, name, blob), vs in sorted(entries.items()):
        e = {"name": name}
        if container:
            e["container"] = container
        e["in"] = vs
        e.update(json.loads(blob))
        commands.append(e)
    with open(args.out, "w") as f:
        f.write('{"versions":' + json.dumps(versions) + ',"commands":[\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":"), sort_keys=False) for c in commands))
        f.write("\n]}\n")
    print(f"{args.out}: {len(commands)} entries over {versions}")


if __name__ == "__main__":
    main()
