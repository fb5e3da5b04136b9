#!/usr/bin/env python3
"""Checks the kernels of nvcc's PTX for code the compiler dropped.

The kernels must not depend on torch's nvcc flags: with a lambda called through a host function
pointer in device code (valid only under --expt-relaxed-constexpr, which torch's extension build
passes), a bare nvcc dropped as unreachable the code after the call, silently (2026-12-02): whole
kernels, and the staging path of others. Two checks, on the PTX of each kernel source:
  - every entry of the bare build writes global memory (st/red/atom on .global, or a generic st),
    but those in ALLOWED_EMPTY, empty on purpose;
  - with --relaxed DIR, every entry has as many instructions as in the build with
    --expt-relaxed-constexpr (same-named .ptx files in DIR): code dropped in one build only shows.

Usage: ptx_entries_check.py [--relaxed DIR] FILE.ptx...
"""
import os
import re
import sys

ALLOWED_EMPTY = ("dependent_launch_probe_kernel",)
STORE = re.compile(r"\b(st|red|atom)(\.[a-z]+)*\.global\b|\bst(\.v\d)?\.[a-z0-9]+\s+\[")
INSTRUCTION = re.compile(r"^\s*(@!?%p\d+\s+)?[a-z][\w.]*[\s;]")


def entries(text):
    """{key: body} of every .entry in a PTX file. The key drops the mangled name's prefix up to the
    kernel's own name (the anonymous namespace's part, with the file's name and a number, differs
    between compilations)."""
    out = {}
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
        name = m.group(1)
        own = list(re.finditer(r"(?:small|diag|dependent|sweep|tri)_[a-z_]*kernel", name))
        out[name[own[-1].start():] if own else name] = text[start:i]
    return out


def instructions(body):
    return sum(1 for line in body.splitlines() if INSTRUCTION.match(line))


def main(argv):
    relaxed = None
    if len(argv) >= 2 and argv[0] == "--relaxed":
        relaxed, argv = argv[1], argv[2:]
    bad, total = [], 0
    for path in argv:
        with open(path) as f:
            ours = entries(f.read())
        theirs = None
        if relaxed is not None:
            with open(os.path.join(relaxed, os.path.basename(path))) as f:
                theirs = entries(f.read())
            for key in sorted(set(theirs) - set(ours)):
                bad.append(f"{path}: {key}: only in the --expt-relaxed-constexpr build")
        for key, body in ours.items():
            total += 1
            if not any(a in key for a in ALLOWED_EMPTY) and not STORE.search(body):
                bad.append(f"{path}: {key}: no global store (body removed?)")
            if theirs is not None:
                if key not in theirs:
                    bad.append(f"{path}: {key}: missing from the --expt-relaxed-constexpr build")
                elif instructions(body) != instructions(theirs[key]):
                    bad.append(f"{path}: {key}: {instructions(body)} instructions against "
                               f"{instructions(theirs[key])} with --expt-relaxed-constexpr")
    if total == 0:
        print("ptx_entries_check: no kernel entries found", file=sys.stderr)
        return 1
    for b in bad:
        print(b, file=sys.stderr)
    print(f"ptx_entries_check: {total} kernels, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
