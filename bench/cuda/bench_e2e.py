#!/usr/bin/env python3
"""bench_e2e.py -- the whole model end to end on one GPU: octet against PyTorch,
measured in one run.

Model: the Llama-3-8B shape (hidden 4096, intermediate 14336, 32 layers, 32
query / 8 KV heads, vocab 128256), random BF16 weights written by transformers
(LlamaForCausalLM initialised on the GPU, then save_pretrained); batch 1.

Rows (the octet rows first, each its own octet process; then PyTorch's, in this one):
  octet --device cuda         bf16, fp8 and fp8_per_block, each with --kv-cache-dtype
                              auto and fp8 (--calculate-kv-scales); prompt 512, decode
                              128; fp8 also at prompt 8192 (KV auto and fp8), and at
                              512 with --enforce-eager (no CUDA graphs).
                              `octet generate --warmup --ignore-eos --json`: TTFT and
                              decode tok/s of the timed run after one untimed pass
                              over the same prompt; --octet-runs processes per row
                              (default 3), each figure their median (every run's
                              in the JSON: ttft_runs_ms, itl_runs_ms).
  pytorch bf16 graph          transformers' LlamaForCausalLM (BF16, its default
                              attention) with a StaticCache; the prefill eager; the
                              decode step (forward, greedy argmax, position + 1)
                              captured in one CUDA graph and replayed.
  pytorch bf16 compile+graph  the same with model.forward torch.compile'd
                              (--compile-mode, "default": Inductor without CUDA graphs
                              of its own), warmed up, then captured in one CUDA graph.
  pytorch fp8 graph           every nn.Linear of the decoder layers (lm_head stays
                              BF16) replaced by an FP8 W8A8 module: E4M3 weights with
                              one scale per output channel (row amax / 448), the input
                              quantized per token in torch ops (row amax / 448, floored
                              at 1/(448*512), x / scale -> float8_e4m3fn), then
                              torch._scaled_mm with row-wise scales (scale_a [m,1],
                              scale_b [1,n], float32) into BF16, plus the bias if any.
  pytorch fp8 compile+graph   the FP8 model compiled as above, then captured.
  The model is loaded once; the FP8 rows convert it in place after the BF16 rows.  A
  refused capture leaves the decode eager (the row's engine says so, capture_error
  says why); any other failure leaves an error in its row and the run goes on.
  The FP8 rows also record logits_rel_err_vs_bf16 (the prefill's last logits against
  the BF16 row's); on these random weights FP8 rounding alone moves them by about
  0.65 at 32 layers (a float reference that fake-quantizes the same way moves them
  as far), so it shows that the rows compute, not how accurate FP8 is.
  PyTorch's TTFT: the eager prefill of the prompt (logits of the last position) and
  its argmax: the median of 5 timed prefills after one untimed one (the eager FP8
  prefill is bound by kernel launches and varies by tens of percent from run to
  run).  ITL: wall time of `--decode` steps (graph replays) over their count, after
  the prefill that precedes them.

Columns: TTFT, ITL, decode tok/s, and the read roof's share: the bytes one decode
step must read (the linear weights as loaded, the BF16 lm_head and the KV cache, at
the mean context of the decode) at the read bandwidth measured in this run, divided
by the measured ITL.  The read bandwidth is the best of several reductions over the
same 4 GiB buffer (torch.amax of its BF16 view and torch.sum of its float32 view,
each whole and by rows, and a Triton sum kernel at two tile sizes): bytes read over
the best of 5 timed calls; each one's GB/s is in the JSON (read_roof).

After the table, one line per octet FP8 row: its ITL and TTFT against the best
PyTorch row of this run at the same prompt (PyTorch's time over octet's: above 1,
octet is faster).

Usage (GPU machine, transformers installed):
    python3 bench/cuda/bench_e2e.py --octet /path/to/octet --out OUT [--model /tmp/llama8b]
    python3 bench/cuda/bench_e2e.py --octet /path/to/octet --out OUT --quick --torch-quick
  --quick          octet: KV auto only, no --enforce-eager row
  --torch-quick    PyTorch: the bf16 graph and fp8 compile+graph rows only
  --torch-rows L   PyTorch: the rows named in L (bf16-graph,bf16-compile,fp8-graph,fp8-compile)
  --no-torch, --no-octet   leave one side out
  --compile-mode M torch.compile mode of the compiled rows (default "default";
                   "max-autotune-no-cudagraphs" autotunes the GEMMs: minutes more
                   per compiled row)
Writes OUT/bench_e2e.json after every row (rows with their errors and logs, the read
roof's measurements, the torch / transformers / triton versions, the GPU's name) and
prints a Markdown table last.
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time
import traceback

import torch

SHAPE = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
             max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
             tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)

FP8_MAX = 448.0
FP8_FLOOR = 1.0 / (448.0 * 512.0)  # the scale floor of octet's quantizer (OCT_CUDA_SCALE_FLOOR)
ROOF_BYTES = 4 << 30
# --torch-rows key -> (scheme, compiled)
TORCH_VARIANTS = {"bf16-graph": ("bf16", False), "bf16-compile": ("bf16", True),
                  "fp8-graph": ("fp8", False), "fp8-compile": ("fp8", True)}
TORCH_QUICK = ("bf16-graph", "fp8-compile")
T0 = time.time()


def log(msg):
    print("[%s +%7.1f s] %s" % (time.strftime("%H:%M:%S"), time.time() - T0, msg), flush=True)


def err_text(e):
    return "%s: %s" % (type(e).__name__, str(e)[:600])


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


# ---- read roof ----

_SUM_KERNEL = []


def triton_sum(xf, chunk, block, warps):
    """A Triton kernel that only reads xf (float32, contiguous): each program sums
    `chunk` consecutive floats, `block` per load, and stores one partial sum."""
    if not _SUM_KERNEL:
        import triton
        import triton.language as tl

        @triton.jit
        def _sum_chunks(x_ptr, out_ptr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
            base = tl.program_id(0).to(tl.int64) * CHUNK
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, CHUNK, BLOCK):
                acc += tl.load(x_ptr + base + off + tl.arange(0, BLOCK))
            tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))
        _SUM_KERNEL.append(_sum_chunks)
    kernel = _SUM_KERNEL[0]
    grid = xf.numel() // chunk
    out = torch.empty(grid, dtype=torch.float32, device=xf.device)
    return lambda: kernel[(grid,)](xf, out, CHUNK=chunk, BLOCK=block, num_warps=warps)


def best_seconds(fn, reps=5):
    fn()  # warm-up (and the Triton kernels' compilation)
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return best


def read_roof():
    """(best GB/s, its name, {name: GB/s or error}) over reductions of one 4 GiB buffer."""
    x = torch.empty(ROOF_BYTES, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    bf, f32 = x.view(torch.bfloat16), x.view(torch.float32)
    cands = [("amax_bf16", lambda: torch.amax(bf)),
             ("amax_bf16_rows", lambda: torch.amax(bf.view(-1, 1 << 16), dim=1)),
             ("sum_f32", lambda: torch.sum(f32)),
             ("sum_f32_rows", lambda: torch.sum(f32.view(-1, 1 << 15), dim=1))]
    each = {}
    for name, chunk, block, warps in (("triton_sum_f32_256k", 1 << 16, 4096, 8),
                                      ("triton_sum_f32_64k", 1 << 14, 2048, 4)):
        try:
            cands.append((name, triton_sum(f32, chunk, block, warps)))
        except Exception as e:
            each[name] = err_text(e)
    for name, fn in cands:
        try:
            each[name] = ROOF_BYTES / best_seconds(fn) / 1e9
        except Exception as e:
            each[name] = err_text(e)
    del x, bf, f32, cands
    gc.collect()
    torch.cuda.empty_cache()
    nums = {k: v for k, v in each.items() if isinstance(v, float)}
    if not nums:
        raise RuntimeError("no read-roof measurement succeeded: %s" % each)
    best = max(nums, key=nums.get)
    return nums[best], best, each


def step_bytes(weight_bytes_per_param, kv_bytes, ctx):
    h, i, L, V = 4096, 14336, 32, 128256
    kvd = 8 * 128
    linear = L * (h * (h + 2 * kvd) + h * h + 2 * h * i + i * h)
    return linear * weight_bytes_per_param + V * h * 2 + L * 2 * kvd * ctx * kv_bytes


def roof_share(roof_gbs, weight_bytes_per_param, kv_bytes, prompt, decode, itl_ms):
    need = step_bytes(weight_bytes_per_param, kv_bytes, prompt + decode // 2)
    return need / (roof_gbs * 1e9) / (itl_ms / 1e3)


# ---- octet ----

def octet_cases(quick):
    """(quantization or None, kv dtype or None, prompt, enforce_eager) per octet row."""
    cases = [(q, kv, 512, False) for q in (None, "fp8", "fp8_per_block") for kv in (None, "fp8")]
    cases += [("fp8", None, 512, True), ("fp8", None, 8192, False), ("fp8", "fp8", 8192, False)]
    if quick:  # KV auto at 512, both KV dtypes at 8192, no eager row
        cases = [c for c in cases if (c[1] is None or c[2] == 8192) and not c[3]]
    return cases


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
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        tail = e.stderr[-1500:] if isinstance(e.stderr, str) else ""
        return {"error": "timed out after 300 s", "log": tail, "wall_s": time.time() - t}
    except OSError as e:
        return {"error": err_text(e)}
    wall = time.time() - t
    if r.returncode != 0:
        return {"error": r.stderr[-600:], "rc": r.returncode, "wall_s": wall}
    try:
        tm = json.loads(r.stdout)["timings"]
        out = {"ttft_ms": tm["ttft_ms"], "itl_ms": 1e3 / tm["decode_tok_s"],
               "decode_tok_s": tm["decode_tok_s"], "load_s": tm["load_s"]}
    except (ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        return {"error": "unreadable --json output: %s" % err_text(e),
                "log": r.stdout[-600:] + r.stderr[-900:], "wall_s": wall}
    out.update(wall_s=wall, log=r.stderr[-1500:])
    return out


def median(xs):
    """The middle value (the lower of the two middle ones for an even count)."""
    return sorted(xs)[(len(xs) - 1) // 2]


def octet_median_row(runs, *args, **kw):
    """octet_row `runs` times: the first error, or each figure's median over the
    runs (ITL's median gives decode_tok_s), with every run's TTFT and ITL."""
    rs = []
    for _ in range(runs):
        r = octet_row(*args, **kw)
        if "error" in r:
            return r
        rs.append(r)
    out = {k: median([r[k] for r in rs]) for k in ("ttft_ms", "itl_ms", "load_s")}
    out.update(decode_tok_s=1e3 / out["itl_ms"], ttft_runs_ms=[r["ttft_ms"] for r in rs],
               itl_runs_ms=[r["itl_ms"] for r in rs], wall_s=sum(r["wall_s"] for r in rs),
               log=rs[-1]["log"])
    return out


# ---- PyTorch ----

class Fp8Linear(torch.nn.Module):
    """W8A8 FP8 stand-in for an nn.Linear: E4M3 weights [n,k] with one float32 scale
    per output channel, the input quantized per token on every call, one
    torch._scaled_mm with row-wise scales into BF16."""

    def __init__(self, lin):
        super().__init__()
        w = lin.weight.detach().float()
        sw = torch.clamp_min(w.abs().amax(dim=1, keepdim=True) / FP8_MAX, FP8_FLOOR)  # [n,1]
        self.register_buffer("wq", (w / sw).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                             .contiguous())  # [n,k] row-major: wq.t() is column-major
        self.register_buffer("sw", sw.reshape(1, -1).contiguous())  # scale_b: [1,n]
        self.register_buffer("bias", None if lin.bias is None else lin.bias.detach())
        self.in_features, self.out_features = lin.in_features, lin.out_features

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        sx = torch.clamp_min(x2.abs().amax(dim=1, keepdim=True).float() / FP8_MAX,
                             FP8_FLOOR)  # scale_a: [m,1]
        xq = (x2.float() / sx).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(xq, self.wq.t(), scale_a=sx, scale_b=self.sw,
                             out_dtype=torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, self.out_features)


def to_fp8(model):
    """Replace every nn.Linear under model.model.layers by an Fp8Linear, in place."""
    n = 0
    for layer in model.model.layers:
        for name, mod in list(layer.named_modules()):
            if isinstance(mod, torch.nn.Linear):
                parent_name, _, child = name.rpartition(".")
                parent = layer.get_submodule(parent_name) if parent_name else layer
                setattr(parent, child, Fp8Linear(mod))
                n += 1
    gc.collect()
    torch.cuda.empty_cache()
    return n


def torch_measure(model, prompt, decode, compile_mode, ref_logits, batch=1):
    """One PyTorch row on `model` as it is: returns (row fields, the prefill's last logits).
    batch > 1: that many copies of the prompt, prefilled together and decoded in one step."""
    from transformers import StaticCache
    r = {}
    ids = torch.tensor([[1000 + (7 * i) % 100000 for i in range(prompt)]] * batch, device="cuda")
    # room for the warm-up steps that run before the prefill the timed decode starts from
    cache = StaticCache(config=model.config, max_cache_len=prompt + decode + 16)
    prompt_pos = torch.arange(prompt, device="cuda")
    tok_buf = torch.zeros((batch, 1), dtype=torch.long, device="cuda")
    pos_buf = torch.full((1,), prompt, dtype=torch.long, device="cuda")

    def prefill():
        cache.reset()
        logits = model(input_ids=ids, past_key_values=cache, use_cache=True,
                       cache_position=prompt_pos, logits_to_keep=1).logits[:, -1]
        tok_buf.copy_(logits.argmax(-1, keepdim=True))
        pos_buf.fill_(prompt)
        return logits

    prefill()
    torch.cuda.synchronize()
    ttfts = []
    for _ in range(5):
        t = time.perf_counter()
        logits = prefill()
        torch.cuda.synchronize()
        ttfts.append((time.perf_counter() - t) * 1e3)
    r["ttft_ms"], r["ttft_runs_ms"] = sorted(ttfts)[2], ttfts
    logits = logits.float()
    r["logits_finite"] = bool(torch.isfinite(logits).all().item())
    if ref_logits is not None:
        r["logits_rel_err_vs_bf16"] = ((logits - ref_logits).norm() / ref_logits.norm()).item()

    fwd = model.forward
    if compile_mode:
        fwd = torch.compile(model.forward, mode=compile_mode)

    def step():
        out = fwd(input_ids=tok_buf, past_key_values=cache, use_cache=True,
                  cache_position=pos_buf).logits[:, -1]
        tok_buf.copy_(out.argmax(-1, keepdim=True))
        pos_buf.add_(1)

    if compile_mode:
        log("  compiling the decode step (mode %s)" % compile_mode)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        r["first_step_s"] = time.perf_counter() - t
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    log("  first decode step %.1f s; capturing" % r["first_step_s"])

    graph = None
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        r["mode"] = "graph"
    except Exception as e:  # capture refused: eager decode
        graph = None
        r["mode"] = "eager, capture failed"
        r["capture_error"] = err_text(e)
        log("  capture failed: %s" % r["capture_error"][:200])
    torch.cuda.synchronize()

    prefill()  # the cache, token and position the timed decode starts from
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(decode):
        if graph is not None:
            graph.replay()
        else:
            step()
    torch.cuda.synchronize()
    itl = (time.perf_counter() - t) * 1e3 / decode
    r.update(itl_ms=itl, decode_tok_s=batch * 1e3 / itl, last_token=int(tok_buf[0, 0].item()))
    del graph, cache, fwd
    return r, logits


def torch_keys(a):
    if a.torch_rows:
        return [k.strip() for k in a.torch_rows.split(",") if k.strip()]
    return list(TORCH_QUICK) if a.torch_quick else list(TORCH_VARIANTS)


def torch_rows(a, roof, emit, prompt=512):
    keys = [k for k in TORCH_VARIANTS if k in torch_keys(a)]

    def base(key):
        scheme, compiled = TORCH_VARIANTS[key]
        how = "compile+graph" if compiled else "graph"
        return dict(name="pytorch %s %s" % (scheme, how), engine="pytorch " + how,
                    scheme="bf16" if scheme == "bf16" else "fp8 rowwise", kv="bf16",
                    prompt=prompt, compile_mode=a.compile_mode if compiled else None)

    log("pytorch: loading %s" % a.model)
    try:
        from transformers import AutoModelForCausalLM
        t = time.time()
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
        load_s = time.time() - t
        log("pytorch: loaded in %.1f s" % load_s)
    except Exception as e:
        for key in keys:
            r = base(key)
            r.update(error="load: " + err_text(e), log=traceback.format_exc()[-2000:])
            emit(r)
        return
    ref, fp8_state, fp8_info = None, None, {}
    with torch.no_grad():
        for key in keys:
            scheme, compiled = TORCH_VARIANTS[key]
            r = base(key)
            r["load_s"] = load_s
            if scheme == "fp8" and fp8_state is None:
                log("pytorch: converting the decoder's linears to FP8")
                try:
                    t = time.time()
                    n = to_fp8(model)
                    fp8_info = {"fp8_linears": n, "fp8_convert_s": time.time() - t}
                    fp8_state = "ok"
                except Exception as e:
                    fp8_state = err_text(e)
            if scheme == "fp8":
                r.update(fp8_info)
                if fp8_state != "ok":
                    r["error"] = "fp8 conversion: " + fp8_state
                    emit(r)
                    continue
            log("%s: start" % r["name"])
            torch.cuda.reset_peak_memory_stats()
            logits = None
            try:
                m, logits = torch_measure(model, prompt, a.decode,
                                          a.compile_mode if compiled else None,
                                          ref if scheme == "fp8" else None)
                r.update(m)
                if scheme == "bf16" and ref is None:
                    ref = logits
                r["roof_share"] = roof_share(roof, 2 if scheme == "bf16" else 1, 2, prompt,
                                             a.decode, r["itl_ms"])
            except Exception as e:
                r.update(error=err_text(e), log=traceback.format_exc()[-2000:])
            finally:
                logits = None
                if compiled:
                    try:
                        torch._dynamo.reset()
                    except Exception:
                        pass
                gc.collect()
                torch.cuda.empty_cache()
            r["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 1e9
            emit(r)
    del model, ref
    gc.collect()
    torch.cuda.empty_cache()


# ---- report ----

def fmt_row(r):
    engine = r["engine"]
    if r.get("mode") not in (None, "graph"):
        engine += " (%s)" % r["mode"]
    head = "| %s | %s | %s | %d |" % (engine, r["scheme"], r["kv"], r["prompt"])
    if "itl_ms" not in r:
        return head + " error | | | |"
    share = "%.0f%%" % (100 * r["roof_share"]) if "roof_share" in r else ""
    return head + " %.1f | %.2f | %.0f | %s |" % (r["ttft_ms"], r["itl_ms"], r["decode_tok_s"],
                                                  share)


def comparison_lines(rows):
    lines = []
    for r in rows:
        if not (r["engine"].startswith("octet") and r["scheme"].startswith("fp8")
                and "itl_ms" in r):
            continue
        what = "%s %s, KV %s, prompt %d" % (r["engine"], r["scheme"], r["kv"], r["prompt"])
        pt = [t for t in rows if t["engine"].startswith("pytorch") and t["prompt"] == r["prompt"]
              and "itl_ms" in t]
        if not pt:
            lines.append("- %s: ITL %.2f ms, TTFT %.1f ms; no PyTorch row at this prompt"
                         % (what, r["itl_ms"], r["ttft_ms"]))
            continue
        bi = min(pt, key=lambda t: t["itl_ms"])
        bt = min(pt, key=lambda t: t["ttft_ms"])
        lines.append("- %s: ITL %.2f ms, %.2f\u00d7 PyTorch best (%.2f ms, %s); "
                     "TTFT %.1f ms, %.2f\u00d7 PyTorch best (%.1f ms, %s)"
                     % (what, r["itl_ms"], bi["itl_ms"] / r["itl_ms"], bi["itl_ms"], bi["name"],
                        r["ttft_ms"], bt["ttft_ms"] / r["ttft_ms"], bt["ttft_ms"], bt["name"]))
    return lines


def report(res):
    rows = res["rows"]
    print("\n%s; torch %s, transformers %s, triton %s" % (
        res.get("gpu"), res.get("torch"), res.get("transformers"), res.get("triton")))
    roofs = res.get("read_roof", {})
    each = ", ".join("%s %.0f" % (k, v) if isinstance(v, float) else "%s failed" % k
                     for k, v in roofs.items())
    print("read roof %.0f GB/s (%s; %s)" % (res["read_roof_gbs"], res["read_roof_method"], each))
    for r in rows:
        if "error" in r:
            print("error in %s: %s" % (r.get("name", r["engine"]),
                                       " ".join(str(r["error"]).split())[:300]))
        elif r.get("capture_error"):
            print("capture refused in %s: %s" % (r["name"], r["capture_error"][:300]))
    print("\n| engine | scheme | KV | prompt | TTFT ms | ITL ms | decode tok/s | read-roof share |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(fmt_row(r))
    lines = comparison_lines(rows)
    if lines:
        print("\noctet FP8 against the best PyTorch row at the same prompt "
              "(PyTorch's time over octet's; above 1, octet is faster):")
        print("\n".join(lines))
    sys.stdout.flush()


# ---- main ----

def version_of(name):
    try:
        return __import__(name).__version__
    except Exception:
        return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="octet against PyTorch, the whole 8B model on one GPU")
    ap.add_argument("--octet", help="the octet binary (required unless --no-octet)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="/tmp/llama8b")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--octet-runs", type=int, default=3,
                    help="octet processes per row; each figure is their median")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-octet", action="store_true")
    ap.add_argument("--quick", action="store_true", help="octet: KV auto only at 512, no eager row")
    ap.add_argument("--torch-quick", action="store_true",
                    help="PyTorch: the bf16 graph and fp8 compile+graph rows only")
    ap.add_argument("--torch-rows",
                    help="PyTorch rows, comma-separated: " + ",".join(TORCH_VARIANTS))
    ap.add_argument("--compile-mode", default="default",
                    help='torch.compile mode of the compiled rows ("default", '
                         '"max-autotune-no-cudagraphs", ...)')
    a = ap.parse_args(argv)
    if not a.no_octet and not a.octet:
        ap.error("--octet is required unless --no-octet")
    bad = [k for k in torch_keys(a) if k not in TORCH_VARIANTS]
    if bad:
        ap.error("unknown --torch-rows %s (known: %s)" % (",".join(bad), ",".join(TORCH_VARIANTS)))
    if a.decode < 1:
        ap.error("--decode must be at least 1")
    if a.octet_runs < 1:
        ap.error("--octet-runs must be at least 1")
    return a


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "bench_e2e.json")
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "transformers": version_of("transformers"), "triton": version_of("triton"),
           "args": vars(a), "rows": []}

    def save():
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    def emit(r):
        res["rows"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "log"}), flush=True)
        save()

    log("%s; torch %s, transformers %s" % (res["gpu"], res["torch"], res["transformers"]))
    make_model(a.model)
    roof, how, each = read_roof()
    res.update(read_roof_gbs=roof, read_roof_method=how, read_roof=each)
    save()
    log("read roof %.0f GB/s (%s)" % (roof, how))
    if not a.no_octet:
        for q, kv, p, eager in octet_cases(a.quick):
            log("octet %s, KV %s, prompt %d%s" % (q or "bf16", kv or "auto", p,
                                                  ", --enforce-eager" if eager else ""))
            r = octet_median_row(a.octet_runs, a.octet, a.model, q, kv, p, a.decode, eager)
            r.update(engine="octet" + (" --enforce-eager" if eager else ""), scheme=q or "bf16",
                     kv=kv or "auto", prompt=p)
            r["name"] = "%s %s" % (r["engine"], r["scheme"])
            if "itl_ms" in r:
                r["roof_share"] = roof_share(roof, 2 if q is None else 1, 1 if kv else 2, p,
                                             a.decode, r["itl_ms"])
            emit(r)
    if not a.no_torch:
        torch_rows(a, roof, emit)
    log("done")
    save()
    report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
