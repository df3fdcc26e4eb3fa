#!/usr/bin/env python3
"""bench_serve.py — `octet serve` on one GPU under `octet bench serve_load`, with
PyTorch's static-cache CUDA-graph decode at batch 16 and 64 as the yardstick, in
one run, on the Llama-3-8B shape of bench_e2e.py (random BF16 weights written by
transformers; the real Llama 3 tokenizer files beside them).

For each scheme (BF16; FP8 W8A8 per-tensor weights, per-token activations; the
same with the FP8 KV cache) one server starts with --max-num-seqs 256
--max-num-batched-tokens 2048 --max-model-len 4096 and the default
--gpu-memory-utilization (0.9), then serve_load runs, for each concurrency:
  fixed: prompt 512 token ids, output 128 (ignore_eos), 2 x clients requests
         (at least 8);
  mix:   prompt and output lengths from serve_load --mix (seeded lognormals
         shaped like chat traffic), the same request count.
Then the prefix cache: after one request, 64 requests from 16 clients whose
1100-token prompts share their first 1024 ids, output 16, with and without
prefix caching (FP8).
The KV pool of each scheme, from its load log, says how many 8192-token
sequences fit at the same --gpu-memory-utilization.

    python3 bench/cuda/bench_serve.py --octet D/octet --tokenizer DIR --out OUT
        [--clients 1,4,16,64,256] [--schemes bf16,fp8,fp8_kv] [--no-torch] [--no-prefix]
        [--max-num-batched-tokens 2048]

Writes OUT/bench_serve.json (and the servers' logs) and prints a table.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e as E  # noqa: E402  (the model shape, its writer, PyTorch's rows)

SCHEMES = {"bf16": [], "fp8": ["--quantization", "fp8"],
           "fp8_kv": ["--quantization", "fp8", "--kv-cache-dtype", "fp8",
                      "--calculate-kv-scales"]}
SERVER = ["--max-num-seqs", "256", "--max-num-batched-tokens", "2048", "--max-model-len", "4096",
          "--max-connections", "1024"]


def start_server(octet, model, args, port, logpath):
    cmd = [octet, "serve", "--model", model, "--device", "cuda", "--port", str(port)] + SERVER + args
    log = open(logpath, "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    t = time.time()
    while time.time() - t < 240:
        time.sleep(0.5)
        text = open(logpath).read()
        if "listening on" in text:
            return p, time.time() - t
        if p.poll() is not None:
            break
    stop_server(p)
    raise RuntimeError("server did not start: " + open(logpath).read()[-1500:])


def stop_server(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def load_run(octet, port, clients, requests, extra, limit=120):
    cmd = [octet, "bench", "serve_load", "--port", str(port), "--clients", str(clients),
           "--requests", str(requests), "--time-limit", str(limit), "--json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 60)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (r.stdout + r.stderr)[-600:], "rc": r.returncode}
    out = json.loads(lines[-1])
    out["rc"] = r.returncode
    return out


def log_facts(text):
    """The load log's KV pool and graph lines."""
    facts = {}
    for ln in text.splitlines():
        if "KV cache sized by" in ln:
            facts["kv_sizing"] = ln.split("] ", 1)[-1]
            tok = ln.rsplit("(", 1)[-1].split(" tokens")[0]
            if tok.isdigit():
                facts["kv_tokens"] = int(tok)
                facts["seqs_8k"] = int(tok) // 8192
        elif "KV cache:" in ln:
            facts["kv_cache"] = ln.split("] ", 1)[-1]
        elif "CUDA graphs:" in ln:
            facts["graphs"] = ln.split("] ", 1)[-1]
    return facts


def scheme_runs(a, scheme, port, emit):
    logpath = os.path.join(a.out, "serve_%s.log" % scheme)
    p, start_s = start_server(a.octet, a.model, SCHEMES[scheme], port, logpath)
    try:
        E.log("%s: server up in %.1f s" % (scheme, start_s))
        for work in ("fixed", "mix"):
            shape = (["--prompt-tokens", "512", "--max-tokens", "128"] if work == "fixed"
                     else ["--mix", "7", "--max-tokens", "512"])
            for c in a.clients:
                r = load_run(a.octet, port, c, max(2 * c, 8), shape)
                r.update(scheme=scheme, workload=work)
                E.log("%s %s c=%d: %s" % (scheme, work, c, json.dumps(r)))
                emit(r)
    finally:
        stop_server(p)
    facts = log_facts(open(logpath).read())
    facts.update(scheme=scheme, start_s=start_s)
    return facts


def prefix_runs(a, port):
    out = {}
    for on in (True, False):
        logpath = os.path.join(a.out, "serve_prefix_%s.log" % ("on" if on else "off"))
        args = SCHEMES["fp8"] + ([] if on else ["--no-enable-prefix-caching"])
        p, _ = start_server(a.octet, a.model, args, port, logpath)
        shape = ["--prompt-tokens", "1100", "--shared-prefix-tokens", "1024", "--max-tokens", "16"]
        try:
            # one request first: the system prompt has been seen, as in a running service
            # (without it the first 16 arrive together and all miss)
            load_run(a.octet, port, 1, 1, shape)
            r = load_run(a.octet, port, 16, 64, shape)
        finally:
            stop_server(p)
        E.log("prefix caching %s: %s" % ("on" if on else "off", json.dumps(r)))
        out["on" if on else "off"] = r
    try:
        out["mean_ttft_ratio"] = out["off"]["ttft_mean_ms"] / out["on"]["ttft_mean_ms"]
    except (KeyError, ZeroDivisionError):
        pass
    return out


def torch_batches(a):
    """PyTorch BF16 and FP8 (graph) decode at batch 16 and 64, prompt 512."""
    from transformers import AutoModelForCausalLM
    rows = []
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=E.torch.bfloat16).cuda().eval()
    with E.torch.no_grad():
        for scheme in ("bf16", "fp8"):
            if scheme == "fp8":
                E.to_fp8(model)
            for b in (16, 64):
                r = {"engine": "pytorch graph", "scheme": scheme, "batch": b}
                try:
                    m, _ = E.torch_measure(model, 512, a.decode, None, None, batch=b)
                    r.update({k: m[k] for k in ("ttft_ms", "itl_ms", "decode_tok_s", "mode")})
                except Exception as e:  # a row that fails is reported, not fatal
                    r["error"] = E.err_text(e)
                E.log("pytorch %s B=%d: %s" % (scheme, b, json.dumps(r)))
                rows.append(r)
                E.gc.collect()
                E.torch.cuda.empty_cache()
    del model
    E.gc.collect()
    E.torch.cuda.empty_cache()
    return rows


def report(res):
    print("| scheme | workload | clients | req/s | out tok/s | TTFT p50 / p99 / mean ms | "
          "ITL p50 / p99 ms | failed |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in res["runs"]:
        if "out_tok_s" not in r:
            print("| %s | %s | | error: %s |" % (r["scheme"], r["workload"], r.get("error", "")[:80]))
            continue
        print("| %s | %s | %d | %.2f | %.0f | %.1f / %.1f / %.1f | %.2f / %.2f | %d |" % (
            r["scheme"], r["workload"], r["clients"], r["req_s"], r["out_tok_s"],
            r["ttft_p50_ms"], r["ttft_p99_ms"], r["ttft_mean_ms"], r["itl_p50_ms"],
            r["itl_p99_ms"], r["failed"]))
    for t in res.get("torch", []):
        print("pytorch %s graph B=%d: %s" % (t["scheme"], t["batch"],
                                            "%.0f tok/s" % t["decode_tok_s"]
                                            if "decode_tok_s" in t else t.get("error")))
    for f in res["servers"]:
        print("%s: %s" % (f["scheme"], f.get("kv_sizing", f.get("kv_cache", ""))))
    if "prefix" in res:
        print("prefix caching: mean TTFT ratio %s" % res["prefix"].get("mean_ttft_ratio"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--octet", required=True)
    ap.add_argument("--tokenizer", required=True, help="a folder with tokenizer.json and "
                    "tokenizer_config.json (the real Llama 3 files)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="/tmp/llama8b")
    ap.add_argument("--clients", default="1,4,16,64,256")
    ap.add_argument("--schemes", default="bf16,fp8,fp8_kv")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-prefix", action="store_true")
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    a = ap.parse_args()
    SERVER[SERVER.index("--max-num-batched-tokens") + 1] = str(a.max_num_batched_tokens)
    a.clients = [int(c) for c in a.clients.split(",")]
    os.makedirs(a.out, exist_ok=True)
    E.make_model(a.model)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, f), os.path.join(a.model, f))
    res = {"gpu": E.torch.cuda.get_device_name(), "server_args": SERVER, "runs": [],
           "servers": []}
    path = os.path.join(a.out, "bench_serve.json")

    def save():
        with open(path, "w") as f:
            json.dump(res, f, indent=1)

    def emit(r):
        res["runs"].append(r)
        save()

    if not a.no_torch:
        try:
            res["torch"] = torch_batches(a)
        except Exception as e:
            res["torch_error"] = E.err_text(e)
        save()
    for scheme in a.schemes.split(","):
        try:
            res["servers"].append(scheme_runs(a, scheme, a.port, emit))
        except Exception as e:
            res["servers"].append({"scheme": scheme, "error": E.err_text(e)})
        save()
    if not a.no_prefix:
        try:
            res["prefix"] = prefix_runs(a, a.port)
        except Exception as e:
            res["prefix"] = {"error": E.err_text(e)}
        save()
    report(res)


if __name__ == "__main__":
    main()
