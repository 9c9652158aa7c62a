#!/usr/bin/env python3
"""The layering rules `make lint` holds (docs/architecture.md):

1. No import cycle of more than MAX files (default 3) inside any crate: a file imports
   another when it names a path of it (`crate::a::b`, `super::x`, `self::y`, a `use`
   group); a name re-exported by a `mod.rs`/`lib.rs` counts as an import of the file that
   defines it. Unit tests (`#[cfg(test)]` and below) are not counted.
2. `engine/src/format/` imports nothing of the engine outside `format/`.

usage: scripts/check-layers.py [ROOT] [--max N] [--verbose]; exit 1 when a rule is broken.
"""
import os
import re
import sys

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_]\w*)+)")
GROUP_RE = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::\{([^}]*)\}", re.S)
PUB_USE_RE = re.compile(r"\bpub\s+use\s+(?:(?:crate|self)::)?((?:\w+::)*)(\{[^}]*\}|\w+)\s*;", re.S)


def crate_sources(root):
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git", "fuzz", "node_modules"))
        if "Cargo.toml" in files and os.path.isdir(os.path.join(here, "src")):
            yield os.path.join(here, "src")


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")
        )
        self.text = {}
        for f in self.files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                body = re.sub(r"//[^\n]*", "", fh.read())
            self.text[f] = body.split("#[cfg(test)]")[0]

    def module_of(self, path):
        parts = os.path.relpath(path, self.src)[:-3].split(os.sep)
        return parts[:-1] if parts[-1] in ("mod", "lib", "main") else parts

    def file_of(self, parts):
        """The file defining the longest prefix of the module path `parts`."""
        for n in range(len(parts), 0, -1):
            base = os.path.join(self.src, *parts[:n])
            for cand in (base + ".rs", os.path.join(base, "mod.rs")):
                if os.path.isfile(cand):
                    return cand, parts[n:]
        root = [os.path.join(self.src, r) for r in ("lib.rs", "main.rs")]
        for r in root:
            if os.path.isfile(r):
                return r, parts
        return None, parts

    def reexports(self, f):
        out = {}
        for prefix, names in PUB_USE_RE.findall(self.text.get(f, "")):
            items = names.strip("{}").split(",") if names.startswith("{") else [names]
            for item in items:
                item = item.strip()
                if not item or item == "self":
                    continue
                orig, _, alias = item.partition(" as ")
                path = [p for p in prefix.split("::") if p] + orig.strip().split("::")
                out[(alias or orig).strip().split("::")[-1]] = path
        return out

    def target(self, parts, depth=0):
        f, rest = self.file_of(parts)
        if f is None or depth > 5 or not rest:
            return f
        if os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs"):
            via = self.reexports(f).get(rest[0])
            if via:
                t = self.target(self.module_of(f) + via, depth + 1)
                if t and t != f:
                    return t
        return f

    def imports(self, f):
        me = self.module_of(f)
        text = self.text[f]

        def absolute(kind, parts):
            if kind == "crate":
                return parts
            if kind == "super":
                return me[:-1] + parts
            return me + parts

        paths = [absolute(k, p.strip(":").split("::")) for k, p in PATH_RE.findall(text)]
        for kind, prefix, inner in GROUP_RE.findall(text):
            pre = [p for p in prefix.split("::") if p]
            for item in inner.split(","):
                name = item.split(" as ")[0].strip()
                if name and name != "self":
                    paths.append(absolute(kind, pre + name.split("::")))
        # `use crate::a::b;` or `use crate::a::b::{self, ..}` of a module, then `b::x`.
        modules = [absolute(k, p.split("::")) for k, p in re.findall(r"\buse\s+(crate|super|self)::([\w:]+)\s*;", text)]
        for kind, prefix, inner in GROUP_RE.findall(text):
            if re.search(r"\bself\b", inner) and prefix.strip(":"):
                modules.append(absolute(kind, prefix.strip(":").split("::")))
        for parts in modules:
            alias = parts[-1]
            if alias[:1].islower():
                for rest in re.findall(r"(?<![\w:])" + alias + r"((?:::\w+)+)", text):
                    paths.append(parts + rest.strip(":").split("::"))
        out = set()
        for parts in paths:
            t = self.target(parts)
            if t and t != f:
                out.add(t)
        return out


def strongly_connected(nodes, edges):
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(20000)
    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def main():
    args = sys.argv[1:]
    limit = int(args[args.index("--max") + 1]) if "--max" in args else 3
    verbose = "--verbose" in args
    positional = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--max")]
    root = positional[0] if positional else "."
    broken = 0
    for src in crate_sources(root):
        crate = Crate(src)
        edges = {f: crate.imports(f) for f in crate.files}
        for comp in strongly_connected(crate.files, edges):
            if len(comp) > limit:
                broken += 1
                names = sorted(os.path.relpath(f, root) for f in comp)
                print(f"import cycle of {len(names)} files (more than {limit}): " + ", ".join(names))
                if verbose:
                    inside = set(comp)
                    for f in sorted(comp):
                        outs = sorted(os.path.relpath(t, root) for t in edges[f] if t in inside)
                        print(f"  {os.path.relpath(f, root)} -> {' '.join(outs)}")
        fmt_dir = os.path.join(src, "format") + os.sep
        if os.path.relpath(src, root).replace(os.sep, "/").endswith("engine/src") and os.path.isdir(fmt_dir):
            for f in crate.files:
                if f.startswith(fmt_dir):
                    outside = sorted(os.path.relpath(t, root) for t in edges[f] if not t.startswith(fmt_dir))
                    if outside:
                        broken += 1
                        print(f"{os.path.relpath(f, root)}: the format layer imports {', '.join(outside)}")
    if broken:
        print("check-layers: the rules are in docs/architecture.md")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
