#!/usr/bin/env python3
"""ncu_summary.py -- sums an `ncu --csv --metrics gpu__time_duration.sum` log by
kernel name and grid size: the kernel time of the profiled range, largest first.

    python3 bench/cuda/ncu_summary.py ncu.csv
"""
import collections
import csv
import io
import sys

UNIT_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def main(path):
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("".join(lines))))
    if not rows:
        print("no kernels in %s" % path)
        return
    col = {name: i for i, name in enumerate(rows[0])}
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for r in rows[1:]:
        name = r[col["Kernel Name"]].split("(")[0].replace("void ", "").replace("<unnamed>::", "")
        key = "%s grid %s" % (name, r[col["Grid Size"]])
        scale = UNIT_US.get(r[col["Metric Unit"]], 1e-3)
        tot[key] += float(r[col["Metric Value"]].replace(",", "")) * scale
        cnt[key] += 1
    all_us = sum(tot.values())
    print("kernel time of the range: %.1f us over %d kernels" % (all_us, sum(cnt.values())))
    for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
        print("%9.1f us %5.1f%% %4d x  %s" % (v, 100 * v / all_us, cnt[k], k[:120]))


if __name__ == "__main__":
    main(sys.argv[1])
