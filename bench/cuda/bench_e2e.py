#!/usr/bin/env python3
"""bench_e2e.py -- the whole model end to end on one GPU: octet against PyTorch,
measured in one run.

Model: the Llama-3-8B shape (hidden 4096, intermediate 14336, 32 layers, 32
query / 8 KV heads, vocab 128256), random BF16 weights written by transformers
(LlamaForCausalLM initialised on the GPU, then save_pretrained); batch 1.

Rows:
  octet --device cuda   bf16, fp8 and fp8_per_block, each with --kv-cache-dtype
                        auto and fp8 (--calculate-kv-scales); prompt 512, decode
                        128; fp8 also at prompt 8192, and with --enforce-eager
                        (no CUDA graphs).  `octet generate --warmup
                        --ignore-eos --json`: TTFT and decode tok/s of the timed
                        run after one untimed pass over the same prompt.
  PyTorch 2.x BF16      transformers' model with a static KV cache, prefill
                        eager, the decode step captured in one CUDA graph (eager
                        when capture fails; the row says which).
Columns: TTFT, ITL, decode tok/s, and the read roof's share: the bytes one
decode step must read (the linear weights as loaded, the lm_head and the KV
cache) at the read bandwidth measured in this run (a reduction over 4 GiB),
divided by the measured ITL.

Usage (GPU machine, transformers installed):
    python3 bench/cuda/bench_e2e.py --octet /path/to/octet --out OUT [--model /tmp/llama8b]
Writes OUT/bench_e2e.json and prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

SHAPE = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
             max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
             tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)


def make_model(path):
    if os.path.exists(os.path.join(path, "config.json")):
        return
    from transformers import LlamaConfig, LlamaForCausalLM
    t = time.time()
    cfg = LlamaConfig(**SHAPE)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path)
    del model
    torch.cuda.empty_cache()
    print("model written in %.1f s" % (time.time() - t), flush=True)


def read_roof_gbs():
    x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    v = x.view(torch.bfloat16)
    best = 1e9
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.amax(v)
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    del x, v
    torch.cuda.empty_cache()
    return (4 << 30) / best / 1e9


def step_bytes(weight_bytes_per_param, kv_bytes, ctx):
    h, i, L, V = 4096, 14336, 32, 128256
    kvd = 8 * 128
    linear = L * (h * (h + 2 * kvd) + h * h + 2 * h * i + i * h)
    return linear * weight_bytes_per_param + V * h * 2 + L * 2 * kvd * ctx * kv_bytes


def octet_row(octet, model, q, kv, prompt, decode, eager=False):
    ids = ",".join(str(1000 + (7 * i) % 100000) for i in range(prompt))
    cmd = [octet, "generate", "--model", model, "--device", "cuda", "--prompt-ids", ids,
           "--max-tokens", str(decode), "--temperature", "0", "--ignore-eos", "--warmup",
           "--json"]
    if q:
        cmd += ["--quantization", q]
    if kv:
        cmd += ["--kv-cache-dtype", kv, "--calculate-kv-scales"]
    if eager:
        cmd += ["--enforce-eager"]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    wall = time.time() - t
    if r.returncode != 0:
        return {"error": r.stderr[-600:]}
    j = json.loads(r.stdout)
    tm = j["timings"]
    return {"ttft_ms": tm["ttft_ms"], "itl_ms": 1e3 / tm["decode_tok_s"],
            "decode_tok_s": tm["decode_tok_s"], "load_s": tm["load_s"], "wall_s": wall,
            "log": r.stderr[-1500:]}


def torch_row(model_path, prompt, decode):
    from transformers import AutoModelForCausalLM, StaticCache
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([[1000 + (7 * i) % 100000 for i in range(prompt)]], device="cuda")
    cache = StaticCache(config=model.config, max_cache_len=prompt + decode + 8)
    with torch.no_grad():
        def prefill():
            cache.reset()
            return model(input_ids=ids, past_key_values=cache, use_cache=True,
                         cache_position=torch.arange(prompt, device="cuda")).logits[:, -1]
        prefill()
        torch.cuda.synchronize()
        t = time.time()
        logits = prefill()
        tok = logits.argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        ttft = (time.time() - t) * 1e3
        tok_buf = tok.clone()
        pos_buf = torch.tensor([prompt], device="cuda")

        def step():
            out = model(input_ids=tok_buf, past_key_values=cache, use_cache=True,
                        cache_position=pos_buf).logits[:, -1]
            return out.argmax(-1, keepdim=True)
        mode = "graph"
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                nxt = step()
            run = lambda: g.replay()
        except Exception as e:  # capture refused: eager decode
            mode = "eager (%s)" % type(e).__name__
            nxt = None
            run = None
        torch.cuda.synchronize()
        t = time.time()
        for i in range(decode):
            pos_buf.fill_(prompt + i)
            if run:
                run()
                tok_buf.copy_(nxt)
            else:
                tok_buf.copy_(step())
        torch.cuda.synchronize()
        itl = (time.time() - t) * 1e3 / decode
    del model, cache
    torch.cuda.empty_cache()
    return {"ttft_ms": ttft, "itl_ms": itl, "decode_tok_s": 1e3 / itl, "mode": mode}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octet", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="/tmp/llama8b")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--quick", action="store_true", help="kv auto only, no eager row")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    make_model(a.model)
    roof = read_roof_gbs()
    print("read roof %.0f GB/s" % roof, flush=True)
    rows = []
    cases = [(q, kv, 512, False) for q in (None, "fp8", "fp8_per_block") for kv in (None, "fp8")]
    cases += [("fp8", None, 512, True), ("fp8", None, 8192, False), ("fp8", "fp8", 8192, False)]
    if a.quick:
        cases = [c for c in cases if c[1] is None and not c[3]]
    for q, kv, p, eager in cases:
        r = octet_row(a.octet, a.model, q, kv, p, a.decode, eager)
        wb = 2 if q is None else 1
        r.update(engine="octet" + (" --enforce-eager" if eager else ""), scheme=q or "bf16",
                 kv=kv or "auto", prompt=p)
        if "itl_ms" in r:
            need = step_bytes(wb, 1 if kv else 2, p + a.decode // 2)
            r["roof_share"] = need / (roof * 1e9) / (r["itl_ms"] / 1e3)
        rows.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "log"}), flush=True)
    if not a.no_torch:
        for p in (512,):
            try:
                r = torch_row(a.model, p, a.decode)
                need = step_bytes(2, 2, p + a.decode // 2)
                r["roof_share"] = need / (roof * 1e9) / (r["itl_ms"] / 1e3)
            except Exception as e:
                r = {"error": "%s: %s" % (type(e).__name__, str(e)[:400])}
            r.update(engine="pytorch " + torch.__version__, scheme="bf16", kv="bf16", prompt=p)
            rows.append(r)
            print(json.dumps(r), flush=True)
    with open(os.path.join(a.out, "bench_e2e.json"), "w") as f:
        json.dump({"read_roof_gbs": roof, "rows": rows,
                   "gpu": torch.cuda.get_device_name()}, f, indent=1)
    print("\n| engine | scheme | KV | prompt | TTFT ms | ITL ms | decode tok/s | read-roof share |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "itl_ms" not in r:
            print("| %s | %s | %s | %d | error | | | |" % (r["engine"], r["scheme"], r["kv"],
                                                       r["prompt"]))
            continue
        print("| %s | %s | %s | %d | %.1f | %.2f | %.0f | %.0f%% |" % (
            r["engine"] + (" (%s)" % r["mode"] if "mode" in r else ""), r["scheme"], r["kv"],
            r["prompt"], r["ttft_ms"], r["itl_ms"], r["decode_tok_s"], 100 * r["roof_share"]))


if __name__ == "__main__":
    sys.exit(main())
