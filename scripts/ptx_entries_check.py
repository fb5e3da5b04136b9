#!/usr/bin/env python3
"""Fails if a kernel in the given PTX files writes nothing to global memory.

Every solve kernel of csrc/kernels writes X (or the inverted blocks), so an entry without a
global store (st.global, or a red/atom on global memory) has had its body removed by the
compiler: undefined behaviour it proved on every path, as when device code called a lambda
through a host function pointer (a bare nvcc without --expt-relaxed-constexpr, 2026-12-02).
Entries named in ALLOWED_EMPTY are empty on purpose.

Usage: ptx_entries_check.py FILE.ptx...
"""
import re
import sys

ALLOWED_EMPTY = ("dependent_launch_probe_kernel",)


def entries(text):
    """(name, body) of every .entry in a PTX file."""
    for m in re.finditer(r"\.entry\s+(\S+?)\s*\(", text):
        start = text.find("{", m.end())
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        yield m.group(1), text[start:i]


def main(paths):
    bad, total = [], 0
    for path in paths:
        with open(path) as f:
            text = f.read()
        for name, body in entries(text):
            total += 1
            if any(a in name for a in ALLOWED_EMPTY):
                continue
            if not re.search(r"\b(st|red|atom)\.global\b|\bst\.(v\d\.)?[a-z0-9]+\s+\[", body):
                bad.append(f"{path}: {name}")
    if total == 0:
        print("ptx_entries_check: no kernel entries found", file=sys.stderr)
        return 1
    for b in bad:
        print(f"kernel without a global store (body removed?): {b}", file=sys.stderr)
    print(f"ptx_entries_check: {total} kernels, {len(bad)} without a global store")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
