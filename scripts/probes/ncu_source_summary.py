"""Summarises Nsight Compute's per-instruction source counters of one kernel launch.

Input: the CSV that `ncu -i REPORT.ncu-rep --page source --csv --print-source sass` prints for a
report taken with `--set full` (one launch). Output, as text: instructions executed (in total and
per task when --tasks is given), the warp-stall samples by reason, executed instructions and
samples by opcode, and the same for runs of --lines SASS lines in address order (where in the
kernel the time goes), plus the loops (a backward branch and the lines it jumps over) that hold
the most executed instructions.

    python scripts/probes/ncu_source_summary.py src.csv --tasks 4096 --lines 250
"""

import argparse
import collections
import csv
import re


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    # The first row names the kernel; the second holds the column names.
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[head]
    data = [r for r in rows[head + 1:] if len(r) >= len(hdr)]
    return rows[0], hdr, data


def opcode(src):
    parts = src.split()
    if not parts:
        return "?"
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--tasks", type=int, default=0, help="divide instruction counts by this (e.g. matrices)")
    ap.add_argument("--lines", type=int, default=250, help="SASS lines per region")
    ap.add_argument("--loops", type=int, default=6, help="print this many loops, most executed first")
    args = ap.parse_args()
    title, hdr, data = load(args.csv)
    ix = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    ex = [int(r[ix["Instructions Executed"]] or 0) for r in data]
    sm = [int(r[ix["Warp Stall Sampling (All Samples)"]] or 0) for r in data]
    src = [r[ix["Source"]].strip() for r in data]
    total, samples = sum(ex), sum(sm)
    print(" ".join(x for x in title if x))
    per = f", {total / args.tasks:.0f} per task" if args.tasks else ""
    print(f"instructions executed (warp-level) {total}{per}; stall samples {samples}")
    by_reason = collections.Counter()
    for r in data:
        for h in stalls:
            by_reason[h] += int(r[ix[h]] or 0)
    print("stall samples by reason: " + ", ".join(f"{k[6:]} {100 * v / samples:.1f}%"
                                                  for k, v in by_reason.most_common(12) if v))
    ops_ex, ops_sm = collections.Counter(), collections.Counter()
    for e, s, t in zip(ex, sm, src):
        ops_ex[opcode(t)] += e
        ops_sm[opcode(t)] += s
    print("by opcode: executed (share), stall samples (share)")
    for op, e in ops_ex.most_common(16):
        print(f"  {op:10s} {e:11d} ({100 * e / total:4.1f}%) {ops_sm[op]:7d} ({100 * ops_sm[op] / samples:4.1f}%)")
    print(f"regions of {args.lines} SASS lines holding at least 1% of the samples:")
    for a in range(0, len(data), args.lines):
        e, s = sum(ex[a:a + args.lines]), sum(sm[a:a + args.lines])
        if s < 0.01 * samples:
            continue
        reasons = collections.Counter()
        for r in data[a:a + args.lines]:
            for h in stalls:
                reasons[h[6:]] += int(r[ix[h]] or 0)
        top = ", ".join(f"{k} {v}" for k, v in reasons.most_common(3))
        print(f"  lines {a:5d}-{a + args.lines - 1:5d}: executed {100 * e / total:4.1f}%, samples {100 * s / samples:4.1f}% ({top})")
    addr = {int(r[ix["Address"]], 16): i for i, r in enumerate(data)}
    loops = []
    for i, t in enumerate(src):
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", t)
        if m and int(m.group(1), 16) in addr and addr[int(m.group(1), 16)] < i:
            j = addr[int(m.group(1), 16)]
            loops.append((sum(ex[j:i + 1]), j, i))
    print("loops (backward branches), most executed first:")
    for e, j, i in sorted(loops, reverse=True)[:args.loops]:
        s = sum(sm[j:i + 1])
        ops = collections.Counter(opcode(t) for t in src[j:i + 1])
        body = ", ".join(f"{k} {v}" for k, v in ops.most_common(6))
        print(f"  lines {j}-{i} ({i - j + 1} instructions: {body}): executed {100 * e / total:4.1f}%, "
              f"samples {100 * s / samples:4.1f}%")


if __name__ == "__main__":
    main()
