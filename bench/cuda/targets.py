#!/usr/bin/env python3
"""targets.py — issue #8's targets, counted from one run of bench_gemm_cuda.py.

Reads the JSON that bench_gemm_cuda.py writes ($OUT/bench_gemm_cuda.json) and prints, for
each target, how many (shape, M) points meet it and which do not, so that the tallies in
docs/BENCHMARKS.md come from the run's numbers rather than from reading the table by eye.

    python3 bench/cuda/targets.py build/cuda_bench/out/bench_gemm_cuda.json

No torch: this runs anywhere.
"""
import json
import sys


def shape(r):
    return f"{r['k']}→{r['n']}"


def tally(title, rows, ok, value, fmt="{:.2f}"):
    """Prints how many rows meet ok(row), then the rows that do not, with value(row)."""
    good = [r for r in rows if ok(r)]
    print(f"- {title}: {len(good)} of {len(rows)}")
    misses = [r for r in rows if not ok(r)]
    by_shape = {}
    for r in misses:
        by_shape.setdefault(shape(r), []).append(f"M={r['m']} " + fmt.format(value(r)))
    for s, items in by_shape.items():
        print(f"    not met, {s}: " + ", ".join(items))
    return len(good)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/cuda_bench/out/bench_gemm_cuda.json"
    with open(path) as f:
        d = json.load(f)
    rows = [r for r in d["rows"] if r.get("oct") == r.get("oct")]  # (NaN: not timed)
    print(f"# {d.get('device', '?')}, torch {d.get('torch', '?')}: {path}")
    small = [r for r in rows if r["m"] <= 16]
    large = [r for r in rows if r["m"] >= 1024]
    tally("octet dyn >= 1.6x bf16 at M <= 16 (do_bench)", small,
          lambda r: r["bf16"] / r["oct"] >= 1.6, lambda r: r["bf16"] / r["oct"])
    graph = [r for r in d.get("graph_rows", []) if r["m"] <= 16]
    if graph:
        tally("octet dyn >= 1.6x bf16 at M <= 16 (CUDA graphs)", graph,
              lambda r: r["bf16"] / r["oct"] >= 1.6, lambda r: r["bf16"] / r["oct"])
    tally("octet dyn >= 1.5x bf16 at M >= 1024", large,
          lambda r: r["bf16"] / r["oct"] >= 1.5, lambda r: r["bf16"] / r["oct"])
    worst = min(rows, key=lambda r: r["bf16"] / r["oct"])
    print(f"- never slower than bf16: minimum {worst['bf16'] / worst['oct']:.2f}x "
          f"({shape(worst)} M={worst['m']})")

    tally("octet dyn faster than torch's dynamic path (compiled quantizer + _scaled_mm row)",
          rows, lambda r: r["oct"] <= r["pt_dyn"], lambda r: r["pt_dyn"] / r["oct"])

    def best_pre(r):
        return min(r["pt_tensor"], r["pt_row"])
    tally("octet dyn >= torch pre-quantized (best of tensor / row)", rows,
          lambda r: best_pre(r) >= r["oct"], lambda r: best_pre(r) / r["oct"])
    pre = [r for r in rows if r.get("oct_pre") == r.get("oct_pre")]
    tally("kernel vs kernel: octet pre-quant row <= pt fp8 row", pre,
          lambda r: r["oct_pre"] <= r["pt_row"], lambda r: r["pt_row"] / r["oct_pre"])
    for r in rows:
        if r["m"] == 1:
            print(f"- M = 1 {shape(r)}: {r['n'] * r['k'] / r['oct'] / 1e6:.2f} TB/s "
                  f"({r['oct']:.1f} us, {r['kernel']})")
    blk = [r for r in rows if r.get("oct_blk") == r.get("oct_blk")]
    tally("block within 10% of token x channel (octet block <= 1.1 x octet dyn)", blk,
          lambda r: r["oct_blk"] <= 1.1 * r["oct"], lambda r: r["oct_blk"] / r["oct"])


if __name__ == "__main__":
    main()
