#!/usr/bin/env python3
"""Checkpoint fixtures for tests/test_checkpoint_fixtures.c (and malformed
safetensors files for tests/test_safetensors.c).

1. Tiny FP8 checkpoints in every layout octet reads, made with PyTorch +
   safetensors (run where torch >= 2.4 and safetensors are installed; the H200
   machine has torch 2.11, safetensors 0.8):

       python3 tools/make_checkpoint_fixtures.py OUTDIR
       cp -r OUTDIR/fixtures/* tests/fixtures/

   OUTDIR/hf/<variant>/   complete Hugging Face folders (config.json,
                          safetensors, index) -- usable by transformers/vLLM
   OUTDIR/fixtures/       the committed form: ckpt_<variant>/ (JSON files,
                          expected.json) and ckpt_<variant>__<file>.safetensors.gz
                          (gzip -9 -n; `make test` unpacks them into build/fixtures)

   Model: Llama, hidden 256, intermediate 512, 4 heads of 64, 2 KV heads,
   vocab 256; "bf16" has 2 layers, the quantized variants 1 layer (size).
   Weights are sparse (75 % zeros) so the gzipped fixtures stay small; row
   gains vary so per-channel and block scales differ.  expected.json holds,
   per linear, the canonical description octet must produce plus 48 sampled
   values, the float64 sum and sum of squares of the weight dequantized by
   PyTorch (`codes.float() * expanded_scale`, f32), and the KV scales.

2. Malformed safetensors (stdlib only, runs anywhere):

       python3 tools/make_checkpoint_fixtures.py --malformed tests/fixtures/ckpt_malformed
"""
import gzip
import json
import os
import shutil
import struct
import sys
import zlib

# ---------------------------------------------------------------- malformed
# Small hand-structured safetensors files, one per violation; stdlib only so
# it runs anywhere (no torch, no numpy).  Each file name says what is wrong;
# tests/test_safetensors.c checks each gives its own specific error.

def _st_bytes(header, data, hdr_len=None):
    """header: dict or raw bytes; returns the file bytes."""
    if isinstance(header, (bytes, bytearray)):
        h = bytes(header)
    else:
        h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    n = len(h) if hdr_len is None else hdr_len
    return struct.pack("<Q", n) + h + data


def make_malformed(outdir):
    os.makedirs(outdir, exist_ok=True)
    f32 = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    good_hdr = {"__metadata__": {"format": "pt"},
                "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                "b": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}}
    good = _st_bytes(good_hdr, f32 + b"\x80\x3f\x00\x40")
    cases = {
        "good.safetensors": good,
        "empty.safetensors": b"",
        "truncated.safetensors": good[:5],
        "header_past_eof.safetensors": _st_bytes(good_hdr, b"", hdr_len=1 << 20),
        "not_json.safetensors": _st_bytes(b'{"a": {"dtype": "F32",,}}', b""),
        "not_object.safetensors": _st_bytes(b"[1, 2, 3]", b""),
        "overlap.safetensors": _st_bytes(
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
        "out_of_range.safetensors": _st_bytes(
            {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
        "wrong_size.safetensors": _st_bytes(
            {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, bytes(16)),
        "unknown_dtype.safetensors": _st_bytes(
            {"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, bytes(1)),
        "duplicate_name.safetensors": _st_bytes(
            b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
            b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2)),
        "non_utf8_name.safetensors": _st_bytes(
            b'{"w\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', bytes(1)),
        "reversed_offsets.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}}, bytes(4)),
        "gap.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
             "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}}, bytes(6)),
        "trailing_bytes.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, bytes(5)),
        "shape_overflow.safetensors": _st_bytes(
            {"a": {"dtype": "F64", "shape": [1 << 31, 1 << 31, 1 << 31], "data_offsets": [0, 8]}},
            bytes(8)),
        "negative_dim.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, bytes(1)),
        "missing_dtype.safetensors": _st_bytes(
            {"a": {"shape": [1], "data_offsets": [0, 1]}}, bytes(1)),
        "bad_metadata.safetensors": _st_bytes(
            {"__metadata__": {"n": 3},
             "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, bytes(1)),
        "unknown_key.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}}, bytes(1)),
        "too_many_dims.safetensors": _st_bytes(
            {"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, bytes(1)),
        "no_brace.safetensors": _st_bytes(b' {"a":1}', b""),
    }
    for name, data in cases.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    print("wrote %d malformed safetensors files to %s" % (len(cases), outdir))

# ------------------------------------------------------------ checkpoints
HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 256, 512, 4, 2, 64, 256


def llama_config(n_layers, qc=None):
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": n_layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
        "mlp_bias": False, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
    }
    if qc is not None:
        c["quantization_config"] = qc
    return c


LINEARS = [  # (suffix, N, K)
    ("self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
    ("self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
    ("mlp.gate_proj", INTER, HIDDEN),
    ("mlp.up_proj", INTER, HIDDEN),
    ("mlp.down_proj", HIDDEN, INTER),
]


def base_weights(torch, n_layers):
    g = torch.Generator().manual_seed(1234)

    def mat(n, k):
        w = torch.randn(n, k, generator=g) * 0.02
        w = w * torch.exp(torch.randn(n, 1, generator=g) * 0.7)  # row gains
        w = w * (torch.rand(n, k, generator=g) < 0.25)  # sparse: small gzip
        return w.to(torch.bfloat16)

    sd = {"model.embed_tokens.weight": mat(VOCAB, HIDDEN), "lm_head.weight": mat(VOCAB, HIDDEN),
          "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16)}
    for i in range(n_layers):
        p = "model.layers.%d." % i
        sd[p + "input_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
        for sfx, n, k in LINEARS:
            sd[p + sfx + ".weight"] = mat(n, k)
    return sd


def linear_names(n_layers):
    return ["model.layers.%d.%s" % (i, sfx) for i in range(n_layers) for sfx, _, _ in LINEARS]


class Q:
    """Quantizers: each returns (codes fp8 [N,K], stored scale tensor, dequant f32)."""

    def __init__(self, torch):
        self.t = torch
        self.f8 = torch.float8_e4m3fn

    def tensor(self, w, scale_shape=(), sdtype=None):
        t = self.t
        wf = w.float()
        s = (wf.abs().max() / 448.0).clamp(min=1e-12)
        stored = s.reshape(scale_shape).to(sdtype or t.float32)
        sf = stored.float().reshape(())
        q = (wf / sf).clamp(-448, 448).to(self.f8)
        return q, stored, q.float() * sf

    def channel(self, w, sdtype, shape2d=True):
        t = self.t
        wf = w.float()
        s = (wf.abs().amax(dim=1, keepdim=True) / 448.0).clamp(min=1e-12)
        stored = s.to(sdtype)
        sf = stored.float()
        q = (wf / sf).clamp(-448, 448).to(self.f8)
        if not shape2d:
            stored = stored.reshape(-1)
        return q, stored, q.float() * sf

    def block(self, w, bn, bk, sdtype):
        t = self.t
        wf = w.float()
        n, k = wf.shape
        nb, kb = -(-n // bn), -(-k // bk)
        pad = t.zeros(nb * bn, kb * bk)
        pad[:n, :k] = wf
        blocks = pad.view(nb, bn, kb, bk)
        amax = blocks.abs().amax(dim=(1, 3))
        stored = (amax.clamp(min=1e-4) / 448.0).to(sdtype)
        sf = stored.float()
        full = sf.repeat_interleave(bn, 0).repeat_interleave(bk, 1)[:n, :k]
        q = (wf / full).clamp(-448, 448).to(self.f8)
        return q, stored, q.float() * full

    def mx(self, w):
        t = self.t
        wf = w.float()
        n, k = wf.shape
        g = wf.view(n, k // 32, 32)
        amax = g.abs().amax(dim=2).clamp(min=2.0 ** -126)
        e = (t.floor(t.log2(amax)) + 127 - 8).clamp(0, 254)
        scale = t.exp2(e - 127)
        q = (g / scale.unsqueeze(2)).clamp(-448, 448).to(self.f8).view(n, k)
        full = scale.repeat_interleave(32, 1)
        return q, e.to(t.uint8), q.float() * full


def sample_stats(torch, name, deq):
    flat = deq.reshape(-1).double()
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    idx = torch.randint(0, flat.numel(), (48,), generator=g)
    nz = torch.nonzero(flat).reshape(-1)
    if nz.numel():  # make sure nonzero values are sampled too
        idx = torch.cat([idx[:24], nz[torch.randint(0, nz.numel(), (24,), generator=g)]])
    return {"samples": [[int(i), float(deq.reshape(-1)[i].item())] for i in idx],
            "sum": float(flat.sum().item()), "sumsq": float((flat * flat).sum().item())}


def write_variant(torch, save_file, out, name, n_layers, qc, tensors, expected, shards=1,
                  extra_files=None):
    hf = os.path.join(out, "hf", name)
    os.makedirs(hf, exist_ok=True)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(llama_config(n_layers, qc), f, indent=2)
    for fname, content in (extra_files or {}).items():
        with open(os.path.join(hf, fname), "w") as f:
            json.dump(content, f, indent=2)
    names = sorted(tensors)
    if shards == 1:
        save_file({k: tensors[k].contiguous() for k in names},
                  os.path.join(hf, "model.safetensors"), metadata={"format": "pt"})
    else:
        per = -(-len(names) // shards)
        wm = {}
        total = 0
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = names[s * per:(s + 1) * per]
            save_file({k: tensors[k].contiguous() for k in part}, os.path.join(hf, fn),
                      metadata={"format": "pt"})
            for k in part:
                wm[k] = fn
                total += tensors[k].numel() * tensors[k].element_size()
        with open(os.path.join(hf, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    with open(os.path.join(hf, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    # committed form
    fx = os.path.join(out, "fixtures")
    d = os.path.join(fx, "ckpt_" + name)
    os.makedirs(d, exist_ok=True)
    for fn in sorted(os.listdir(hf)):
        src = os.path.join(hf, fn)
        if fn.endswith(".safetensors"):
            with open(src, "rb") as f:
                data = f.read()
            with open(os.path.join(fx, "ckpt_%s__%s.gz" % (name, fn)), "wb") as f:
                f.write(gzip.compress(data, compresslevel=9, mtime=0))
        else:
            shutil.copyfile(src, os.path.join(d, fn))


def make_checkpoints(out):
    import torch
    from safetensors.torch import save_file

    q = Q(torch)
    bf16 = torch.bfloat16

    def lin_expect(name, shape, wdt, kind, act, deq, block=None, scale_shape=None,
                   act_group=0, input_scale=None):
        e = {"name": name, "shape": list(shape), "weight_dtype": wdt, "scale_kind": kind,
             "activation": act, "act_group": act_group}
        if block:
            e["block"] = list(block)
        if scale_shape is not None:
            e["scale_shape"] = list(scale_shape)
        if input_scale is not None:
            e["input_scale"] = float(input_scale)
        e.update(sample_stats(torch, name, deq))
        return e

    g = torch.Generator().manual_seed(99)

    def rand_scale():  # an f32 value, so expected.json holds it exactly
        return float(torch.tensor(torch.rand((), generator=g).item() * 0.05 + 0.01,
                                  dtype=torch.float32).item())

    def build(name, n_layers, qc, per_linear, kv=None, shards=1, fmt=None, scheme=None,
              extra=None):
        """per_linear(name, w) -> (dict of extra tensors incl. weight, expectation)."""
        sd = base_weights(torch, n_layers)
        tensors = {k: v for k, v in sd.items() if not k.endswith("_proj.weight")}
        lins = []
        # lm_head stays bf16 in every variant
        lins.append(lin_expect("lm_head", (VOCAB, HIDDEN), "BF16", "none", "none",
                               sd["lm_head.weight"].float()))
        for ln in linear_names(n_layers):
            t, e = per_linear(ln, sd[ln + ".weight"])
            tensors.update(t)
            lins.append(e)
        kv_exp = []
        for attn, entries in (kv or {}).items():
            ke = {"attn": attn}
            for tname, slot, val in entries:
                tensors[tname] = val
                v = float(val.float().reshape(-1)[0].item())
                for s in slot:
                    ke[s + "_scale"] = v
                    ke[s + "_source"] = tname
            kv_exp.append(ke)
        lins.sort(key=lambda e: e["name"])
        exp = {"format": fmt, "scheme": scheme, "n_layers": n_layers, "linears": lins,
               "kv": kv_exp, "kv_quantized": bool(kv) and name != "fp8_dynamic"
               and name != "fp8_block"}
        write_variant(torch, save_file, out, name, n_layers, qc, tensors, exp, shards, extra)

    # -- plain bf16 (2 layers)
    def plain(ln, w):
        return {ln + ".weight": w}, lin_expect(ln, w.shape, "BF16", "none", "none", w.float())
    build("bf16", 2, None, plain, fmt="bf16", scheme="unquantized",
          extra={"generation_config.json": {"bos_token_id": 1, "eos_token_id": 2}})

    ct_base = {"quant_method": "compressed-tensors", "format": "float-quantized",
               "quantization_status": "compressed", "ignore": ["lm_head"],
               "kv_cache_scheme": None}

    def ct_args(strategy, dynamic, **kw):
        a = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy,
             "dynamic": dynamic, "group_size": None, "block_structure": None}
        a.update(kw)
        return a

    def kv_ct(n_layers):
        return {"model.layers.%d.self_attn.attn" % i: [
            ("model.layers.%d.self_attn.k_scale" % i, ["k"], torch.tensor([rand_scale()])),
            ("model.layers.%d.self_attn.v_scale" % i, ["v"], torch.tensor([rand_scale()]))]
            for i in range(n_layers)}

    # -- compressed-tensors FP8 static tensor (+ kv_cache_scheme)
    def ct_static(ln, w):
        qw, s, deq = q.tensor(w, (1,), torch.float32)
        ins = rand_scale()
        return ({ln + ".weight": qw, ln + ".weight_scale": s,
                 ln + ".input_scale": torch.tensor([ins])},
                lin_expect(ln, w.shape, "F8_E4M3", "tensor", "static", deq, scale_shape=(1, 1),
                           input_scale=ins))
    qc = dict(ct_base, config_groups={"group_0": {
        "targets": ["Linear"], "weights": ct_args("tensor", False),
        "input_activations": ct_args("tensor", False), "output_activations": None}},
        kv_cache_scheme=ct_args("tensor", False))
    build("ct_fp8_static", 1, qc, ct_static, kv=kv_ct(1), fmt="compressed-tensors",
          scheme="FP8 (static tensor)")

    # -- FP8_DYNAMIC (bf16 channel scales, as llm-compressor writes), 2 shards
    def ct_dyn(ln, w):
        qw, s, deq = q.channel(w, bf16)
        return ({ln + ".weight": qw, ln + ".weight_scale": s},
                lin_expect(ln, w.shape, "F8_E4M3", "channel", "dynamic_token", deq,
                           scale_shape=(w.shape[0], 1)))
    qc = dict(ct_base, config_groups={"group_0": {
        "targets": ["Linear"], "weights": ct_args("channel", False),
        "input_activations": ct_args("token", True), "output_activations": None}})
    build("ct_fp8_dynamic", 1, qc, ct_dyn, shards=2, fmt="compressed-tensors",
          scheme="FP8_DYNAMIC")

    # -- FP8_BLOCK; the MLP is matched by an exact "re:" target, attention by name list
    def ct_block(ln, w):
        qw, s, deq = q.block(w, 128, 128, torch.float32)
        return ({ln + ".weight": qw, ln + ".weight_scale": s},
                lin_expect(ln, w.shape, "F8_E4M3", "block", "dynamic_group", deq,
                           block=(128, 128), scale_shape=tuple(s.shape), act_group=128))
    qc = dict(ct_base, config_groups={"group_0": {
        "targets": ["re:.*mlp\\.(gate|up|down)_proj$", "re:model.layers.0.self_attn"],
        "weights": ct_args("block", False, block_structure=[128, 128]),
        "input_activations": ct_args("group", True, group_size=128),
        "output_activations": None}})
    build("ct_fp8_block", 1, qc, ct_block, fmt="compressed-tensors", scheme="FP8_BLOCK")

    # -- naive-quantized weight-only (channel); o_proj ignored by a "re:" entry
    def ct_naive(ln, w):
        if ln.endswith("o_proj"):
            return plain(ln, w)
        qw, s, deq = q.channel(w, bf16)
        return ({ln + ".weight": qw, ln + ".weight_scale": s},
                lin_expect(ln, w.shape, "F8_E4M3", "channel", "none", deq,
                           scale_shape=(w.shape[0], 1)))
    qc = dict(ct_base, format="naive-quantized", ignore=["lm_head", "re:.*o_proj"],
              config_groups={"group_0": {
                  "targets": ["Linear"], "weights": ct_args("channel", False),
                  "input_activations": None, "output_activations": None}})
    build("ct_naive_wonly", 1, qc, ct_naive, fmt="compressed-tensors",
          scheme="FP8 weight-only (channel)")

    # -- MXFP8
    def ct_mx(ln, w):
        qw, e, deq = q.mx(w)
        return ({ln + ".weight": qw, ln + ".weight_scale": e},
                lin_expect(ln, w.shape, "F8_E4M3", "mx", "dynamic_group", deq, block=(1, 32),
                           scale_shape=tuple(e.shape), act_group=32))
    mxa = ct_args("group", False, group_size=32, scale_dtype="torch.uint8",
                  zp_dtype="torch.uint8")
    qc = dict(ct_base, format="mxfp8-quantized", config_groups={"group_0": {
        "targets": ["Linear"], "weights": mxa,
        "input_activations": dict(mxa, dynamic=True), "output_activations": None,
        "format": "mxfp8-quantized"}})
    build("ct_mxfp8", 1, qc, ct_mx, fmt="compressed-tensors", scheme="MXFP8")

    # -- Quark per-tensor static, KV via k_proj/v_proj output_scale (0-dim F32)
    fp8spec = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False,
               "symmetric": True, "round_method": "half_even", "scale_type": "float",
               "observer_cls": "PerTensorMinMaxObserver"}

    def static_tensor(ln, w):
        qw, s, deq = q.tensor(w, (), torch.float32)
        ins = rand_scale()
        return ({ln + ".weight": qw, ln + ".weight_scale": s,
                 ln + ".input_scale": torch.tensor(ins)},
                lin_expect(ln, w.shape, "F8_E4M3", "tensor", "static", deq, scale_shape=(1, 1),
                           input_scale=ins))
    kvl = {"weight": fp8spec, "input_tensors": fp8spec,
           "output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False},
           "bias": None}
    qc = {"quant_method": "quark", "quant_mode": "eager_mode", "exclude": ["lm_head"],
          "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "pack_method": "reorder",
                     "weight_format": "real_quantized", "min_kv_scale": 0.0},
          "global_quant_config": {"weight": fp8spec, "input_tensors": fp8spec,
                                  "output_tensors": None, "bias": None},
          "layer_quant_config": {"*k_proj": kvl, "*v_proj": kvl},
          "layer_type_quant_config": {}}

    def kv_out(n_layers):
        return {"model.layers.%d.self_attn.attn" % i: [
            ("model.layers.%d.self_attn.k_proj.output_scale" % i, ["k"],
             torch.tensor(rand_scale())),
            ("model.layers.%d.self_attn.v_proj.output_scale" % i, ["v"],
             torch.tensor(rand_scale()))] for i in range(n_layers)}
    build("quark_fp8", 1, qc, static_tensor, kv=kv_out(1), fmt="quark",
          scheme="FP8 (static tensor)")

    # -- HF fp8 (AutoFP8) static, 0-dim scales, kv_cache_scheme static
    qc = {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"],
          "kv_cache_scheme": "static"}
    build("fp8_static", 1, qc, static_tensor, kv=kv_out(1), fmt="fp8",
          scheme="FP8 (static tensor)")

    # -- AutoFP8 dynamic; deprecated kv_scale name
    def dyn_tensor(ln, w):
        qw, s, deq = q.tensor(w, (), torch.float32)
        return ({ln + ".weight": qw, ln + ".weight_scale": s},
                lin_expect(ln, w.shape, "F8_E4M3", "tensor", "dynamic_tensor", deq,
                           scale_shape=(1, 1)))
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    kv = {"model.layers.0.self_attn.attn": [
        ("model.layers.0.self_attn.kv_scale", ["k", "v"], torch.tensor(rand_scale()))]}
    build("fp8_dynamic", 1, qc, dyn_tensor, kv=kv, fmt="fp8",
          scheme="FP8 (tensor weights, dynamic activations)")

    # -- block weight_scale_inv (DeepSeek-V3 / Qwen3-FP8); down_proj not converted;
    #    ModelOpt-style k_proj.k_scale / v_proj.v_scale KV names
    def fp8_block(ln, w):
        if ln.endswith("down_proj"):
            return plain(ln, w)
        qw, s, deq = q.block(w, 128, 128, torch.float32)
        return ({ln + ".weight": qw, ln + ".weight_scale_inv": s},
                lin_expect(ln, w.shape, "F8_E4M3", "block", "dynamic_group", deq,
                           block=(128, 128), scale_shape=tuple(s.shape), act_group=128))
    qc = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
          "weight_block_size": [128, 128],
          "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.down_proj"]}
    kv = {"model.layers.0.self_attn.attn": [
        ("model.layers.0.self_attn.k_proj.k_scale", ["k"], torch.tensor([rand_scale()])),
        ("model.layers.0.self_attn.v_proj.v_scale", ["v"], torch.tensor([rand_scale()]))]}
    build("fp8_block", 1, qc, fp8_block, kv=kv, fmt="fp8", scheme="FP8_BLOCK")

    # -- fbgemm_fp8
    def fbgemm(ln, w):
        qw, s, deq = q.channel(w, torch.float32)
        return ({ln + ".weight": qw, ln + ".weight_scale": s},
                lin_expect(ln, w.shape, "F8_E4M3", "channel", "dynamic_token", deq,
                           scale_shape=(w.shape[0], 1)))
    qc = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["lm_head"],
          "activation_scale_ub": 1200.0}
    build("fbgemm_fp8", 1, qc, fbgemm, fmt="fbgemm_fp8", scheme="FP8_DYNAMIC")

    total = 0
    fx = os.path.join(out, "fixtures")
    for root, _, files in os.walk(fx):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    print("wrote %s/hf/* and %s (%.2f MB committed form)" % (out, fx, total / 1e6))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--malformed":
        make_malformed(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    make_checkpoints(sys.argv[1])


if __name__ == "__main__":
    main()
