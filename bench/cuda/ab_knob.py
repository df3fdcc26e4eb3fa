#!/usr/bin/env python3
"""ab_knob.py -- one environment knob of the CUDA backend off against on, in one
run on one model: decode ITL (1e3 / decode_tok_s) and TTFT of `octet generate
--json`, each side ROUNDS times alternately, and whether the greedy output ids
of the two sides are equal (where they differ: the first differing index).

    python3 bench/cuda/ab_knob.py --octet OCTET --model /tmp/llama8b \\
        --knob OCTET_CUDA_NORM_FUSED --off 0 --on 1 --quantization fp8 [--prompt 512]

Prints one line per run and a summary: median ITL of each side and their ratio
(on / off; below 1, the knob's "on" value is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(a, value):
    ids = ",".join(str(1000 + (7 * i) % 100000) for i in range(a.prompt))
    cmd = [a.octet, "generate", "--model", a.model, "--device", "cuda", "--prompt-ids", ids,
           "--max-tokens", str(a.decode), "--temperature", "0", "--ignore-eos", "--warmup",
           "--json"]
    if a.quantization:
        cmd += ["--quantization", a.quantization]
    if a.kv:
        cmd += ["--kv-cache-dtype", a.kv, "--calculate-kv-scales"]
    env = dict(os.environ, **{a.knob: value})
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("octet failed (%s=%s): %s" % (a.knob, value, p.stderr[-2000:]))
    o = json.loads(p.stdout.strip().splitlines()[-1])
    t = o["timings"]
    return 1e3 / t["decode_tok_s"], t["ttft_ms"], o["output_ids"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octet", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--knob", required=True)
    ap.add_argument("--off", default="0")
    ap.add_argument("--on", default="1")
    ap.add_argument("--quantization")
    ap.add_argument("--kv", help="--kv-cache-dtype (with --calculate-kv-scales)")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    itl = {a.off: [], a.on: []}
    out = {a.off: [], a.on: []}
    for r in range(a.rounds):
        for v in (a.off, a.on):
            ms, ttft, ids = run(a, v)
            itl[v].append(ms)
            out[v].append(ids)
            print("%s q=%s kv=%s P=%d %s=%s itl %.3f ms ttft %.2f ms" %
                  (os.path.basename(a.model), a.quantization or "bf16", a.kv or "auto", a.prompt,
                   a.knob, v, ms, ttft), flush=True)
    m_off, m_on = statistics.median(itl[a.off]), statistics.median(itl[a.on])

    def cmp(x, y):
        first = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
        return "equal" if x == y else "differ from index %s" % first

    # runs of one side may differ too: each run measures its own kernel choices
    repeat = "; %s runs among themselves: %s" % (a.off, cmp(out[a.off][0], out[a.off][-1])) \
        if a.rounds > 1 else ""
    print("summary: itl %s=%s %.3f ms, %s=%s %.3f ms, on/off %.3f; greedy ids off/on %s%s" %
          (a.knob, a.off, m_off, a.knob, a.on, m_on, m_on / m_off,
           cmp(out[a.off][0], out[a.on][0]), repeat))


if __name__ == "__main__":
    main()
