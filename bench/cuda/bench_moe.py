#!/usr/bin/env python3
"""bench_moe.py — octet's MoE block on one GPU against PyTorch, in one run.

A MoE model with random BF16 weights is written by transformers (layer count
cut, layer shapes real; the disk holds one at a time):

  qwen3   Qwen3-30B-A3B shapes, 24 of 48 layers: hidden 2048, 128 experts,
          top-8, moe_intermediate 768, 32 / 4 heads of 128, vocab 151936
  mixtral Mixtral-8x7B shapes, 8 of 32 layers: hidden 4096, 8 experts, top-2,
          intermediate 14336, 32 / 8 heads of 128, vocab 32000

octet rows (`octet bench batch`, one load per scheme): BF16, fp8 (per-tensor
weights; the experts take one per-tensor activation scale, as vLLM's fused
MoE), fp8_per_block; TTFT of a 512-token prompt, then decode steps of batch 1
and 64 (greedy, CUDA graphs).  PyTorch rows: transformers' model with its
grouped-GEMM experts (experts_implementation="grouped_mm", torch._grouped_mm)
where it loads, else its eager per-expert loop, a static KV cache and the
decode step in one CUDA graph (bench_e2e.torch_measure), BF16, batch 1 and 64.

    python3 bench/cuda/bench_moe.py --octet D/octet --model qwen3|mixtral --out OUT
        [--no-torch] [--decode 64]

Writes OUT/bench_moe_<model>.json and prints the rows and the target ratios.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e as E  # noqa: E402  (torch_measure, logging)

SHAPES = {
    "qwen3": ("Qwen3MoeConfig", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], max_position_embeddings=4096, rope_theta=1000000.0,
        tie_word_embeddings=False, use_sliding_window=False)),
    "mixtral": ("MixtralConfig", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
        num_attention_heads=32, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
        max_position_embeddings=4096, rope_theta=1000000.0, tie_word_embeddings=False,
        sliding_window=None)),
}
BATCHES = (1, 64)
PROMPT = 512


def make_model(name, path, layers=None):
    if os.path.exists(os.path.join(path, "config.json")):
        return
    import torch
    import transformers
    cls, kw = SHAPES[name]
    if layers:
        kw = dict(kw, num_hidden_layers=layers)
    t = time.time()
    cfg = getattr(transformers, cls)(**kw)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(path)
    del model
    torch.cuda.empty_cache()
    E.log("model %s written in %.1f s (%.1f GB)" % (name, time.time() - t, sum(
        os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) / 1e9))


def octet_rows(octet, model, decode):
    rows = []
    for q in (None, "fp8", "fp8_per_block"):
        cmd = [octet, "bench", "batch", "--model", model, "--device", "cuda", "--batch",
               ",".join(str(b) for b in BATCHES), "--prompt", str(PROMPT), "--decode",
               str(decode), "--json"] + (["--quantization", q] if q else [])
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=420)
        sel = [ln.split("info: ", 1)[-1] for ln in r.stderr.splitlines() if "MoE layers" in ln
               or ".experts (" in ln]
        if r.returncode != 0:
            rows.append({"engine": "octet", "scheme": q or "bf16", "error": r.stderr[-800:]})
            E.log("octet %s failed: %s" % (q, r.stderr[-400:]))
            continue
        for line in r.stdout.splitlines():
            j = json.loads(line)
            j.update(engine="octet", scheme=q or "bf16", moe_kernel=sel, wall_s=time.time() - t)
            rows.append(j)
            E.log("octet %-14s B=%-3d TTFT %7.2f ms  step %7.3f ms  %8.1f tok/s  (load %.1f s)" % (
                q or "bf16", j["batch"], j["ttft_ms"], j["itl_ms"], j["decode_tok_s"], j["load_s"]))
    return rows


def torch_rows(model_dir, decode):
    import torch
    from transformers import AutoModelForCausalLM
    rows = []
    for impl in ("grouped_mm", "eager"):
        try:
            t = time.time()
            model = AutoModelForCausalLM.from_pretrained(
                model_dir, dtype=torch.bfloat16, device_map="cuda",
                experts_implementation=impl).eval()
            E.log("torch: loaded with experts_implementation=%s in %.1f s" % (impl, time.time() - t))
        except Exception as e:  # this transformers has no such implementation
            E.log("torch: experts_implementation=%s: %s" % (impl, E.err_text(e)[:300]))
            continue
        for b in BATCHES:
            try:
                with torch.no_grad():
                    r, _ = E.torch_measure(model, PROMPT, decode, None, None, batch=b)
                r.update(engine="torch", scheme="bf16", experts=impl, batch=b)
                E.log("torch %-10s B=%-3d TTFT %7.2f ms  step %7.3f ms  %8.1f tok/s (%s)" % (
                    impl, b, r["ttft_ms"], r["itl_ms"], r["decode_tok_s"], r["mode"]))
            except Exception as e:
                r = {"engine": "torch", "scheme": "bf16", "experts": impl, "batch": b,
                     "error": E.err_text(e)}
                E.log("torch %s B=%d failed: %s" % (impl, b, r["error"][:300]))
            rows.append(r)
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()
        break  # the grouped-GEMM model measured: the loop is its fallback
    return rows


def ratios(rows):
    def get(engine, scheme, b, key):
        c = [r[key] for r in rows if r.get("engine") == engine and r.get("scheme") == scheme and
             r.get("batch") == b and key in r]
        return min(c) if c else None

    out = {}
    for b in BATCHES:
        f, t, bf = (get("octet", "fp8", b, "itl_ms"), get("torch", "bf16", b, "itl_ms"),
                    get("octet", "bf16", b, "itl_ms"))
        if f and t:
            out["fp8_decode_vs_torch_b%d" % b] = t / f
        if f and bf:
            out["fp8_decode_vs_octet_bf16_b%d" % b] = bf / f
    f, bf = get("octet", "fp8", 1, "ttft_ms"), get("octet", "bf16", 1, "ttft_ms")
    if f and bf:
        out["fp8_prefill512_vs_octet_bf16"] = bf / f
    t = get("torch", "bf16", 1, "ttft_ms")
    if f and t:
        out["fp8_prefill512_vs_torch"] = t / f
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--octet", required=True)
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dir", default=None, help="where the model is written (default /tmp/moe_NAME)")
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the model folder afterwards")
    ap.add_argument("--write-only", action="store_true", help="write the model and stop")
    ap.add_argument("--layers", type=int, default=None,
                    help="layer count instead of the shape's (same layer shapes; for profiles)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    d = a.dir or "/tmp/moe_" + a.model + ("_l%d" % a.layers if a.layers else "")
    make_model(a.model, d, a.layers)
    if a.write_only:
        return
    shape = dict(SHAPES[a.model][1], **({"num_hidden_layers": a.layers} if a.layers else {}))
    res = {"model": a.model, "shape": shape, "prompt": PROMPT, "decode": a.decode}
    res["rows"] = octet_rows(a.octet, d, a.decode)
    if not a.no_torch:
        res["rows"] += torch_rows(d, a.decode)
    res["ratios"] = ratios(res["rows"])
    json.dump(res, open(os.path.join(a.out, "bench_moe_%s.json" % a.model), "w"), indent=1)
    for k, v in res["ratios"].items():
        print("%-34s %.2fx" % (k, v))
    if not a.keep:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
