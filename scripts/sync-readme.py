#!/usr/bin/env python3
"""Refresh the README's quoted code from its sources (tests/tests/readme.rs checks them).

A block after `<!-- file: PATH -->` becomes that whole file; a block after
`<!-- block: PATH -->` becomes the code block of PATH that starts with the same first
code line (the fence and the line after it identify it); of a `.rs` PATH, an excerpt: as many
lines as the block has, from the line equal to its first.
"""
import pathlib, re, sys

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text().split("\n")
out, i = [], 0
while i < len(readme):
    line = readme[i]
    out.append(line)
    m = re.match(r"<!-- (file|block): (\S+) -->$", line)
    i += 1
    if not m:
        continue
    kind, path = m.groups()
    while not readme[i].startswith("```"):
        out.append(readme[i]); i += 1
    fence = readme[i]; out.append(fence); i += 1
    end = readme.index("```", i)
    old = readme[i:end]
    src = (root / path).read_text().rstrip("\n").split("\n")
    if kind == "file":
        new = src
    elif path.endswith(".rs"):
        if old[0] not in src:
            sys.exit(f"{path}: no line {old[0]!r}")
        s = src.index(old[0])
        new = src[s:s + len(old)]
    else:
        starts = [k for k in range(len(src) - 1) if src[k] == fence and src[k + 1] == old[0]]
        if not starts:
            sys.exit(f"{path}: no code block starting with {old[0]!r}")
        s = starts[0] + 1
        new = src[s:src.index("```", s)]
    out.extend(new)
    i = end
(root / "README.md").write_text("\n".join(out))
