#!/usr/bin/env python3
"""Golden logits from transformers for octet's model runtime.

    python3 tools/make_model_fixtures.py OUTDIR      (transformers 5.x, PyTorch)

For each architecture, a tiny randomly initialised model (seeded) is saved in
BF16 as a Hugging Face folder OUTDIR/model_<arch>/ (config.json,
model.safetensors), then loaded back in float32 (the BF16 weights widened
exactly) and run on a fixed id sequence.  Dense models first (their order and
seeds must not change: their weights stay identical when MoE models are
appended), then the MoE models: Mixtral (4 experts, top-2, renormalised),
Qwen3-MoE (norm_topk_prob false, q/k norm) and GraniteMoe (stacked 3-D
input_linear / output_linear, multipliers).  summary.json also records the
tensor names and shapes of layer 0 as saved and as held in memory (how
transformers lays out experts).  OUTDIR/model_<arch>/expected.safetensors
holds:
  * "ids"         I32[T]      the input ids
  * "logits"      F32[T, V]   fp32 logits for every position
  * "greedy"      I32[G]      greedy continuation of `ids` (G tokens, no EOS stop)
octet computes the same with --dtype float32 (tests/test_model.c).
"""
import json
import math
import os
import shutil
import sys
import traceback

import torch
from safetensors.torch import save_file
from safetensors import safe_open
from transformers import (AutoModelForCausalLM, GraniteConfig, GraniteMoeConfig, LlamaConfig,
                          MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config,
                          Qwen3MoeConfig)

V, H, I, L = 512, 128, 256, 2
T, G = 24, 12


def configs():
    common = dict(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    yield "llama", lambda: LlamaConfig(**common, tie_word_embeddings=True, rope_theta=10000.0,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 64})
    yield "mistral", lambda: MistralConfig(**common, sliding_window=8, rope_theta=10000.0,
                                   tie_word_embeddings=False)
    yield "qwen2", lambda: Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=False,
                               use_sliding_window=False)
    yield "qwen3", lambda: Qwen3Config(**common, head_dim=48, rope_theta=1000000.0,
                               tie_word_embeddings=True, attention_bias=False)
    yield "granite", lambda: GraniteConfig(**common, embedding_multiplier=12.0, residual_multiplier=0.22,
                                   attention_multiplier=0.0078125, logits_scaling=8.0,
                                   tie_word_embeddings=True, rope_theta=10000.0)
    # MoE models: appended after the dense ones (seeds are 100 + position).
    moe = dict(common, intermediate_size=128)
    yield "mixtral", lambda: MixtralConfig(**moe, num_local_experts=4, num_experts_per_tok=2,
                                   sliding_window=None, rope_theta=1000000.0,
                                   tie_word_embeddings=False, router_jitter_noise=0.0)
    yield "qwen3_moe", lambda: Qwen3MoeConfig(**common, head_dim=48, num_experts=4, num_experts_per_tok=2,
                                      moe_intermediate_size=64, norm_topk_prob=False,
                                      decoder_sparse_step=1, mlp_only_layers=[],
                                      rope_theta=1000000.0, tie_word_embeddings=False,
                                      attention_bias=False, use_sliding_window=False)
    yield "granitemoe", lambda: GraniteMoeConfig(**moe, num_local_experts=4, num_experts_per_tok=2,
                                         embedding_multiplier=6.0, residual_multiplier=0.5,
                                         attention_multiplier=0.1, logits_scaling=4.0,
                                         tie_word_embeddings=True, rope_theta=10000.0)


def make_one(out, idx, name, cfg, ids):
    is_moe = bool(getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None))
    torch.manual_seed(100 + idx)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # larger weights than the default init: logits that mean something
        for n, p in model.named_parameters():
            if p.dim() in (2, 3):  # 3-D: stacked / fused expert weights
                p.normal_(0, 0.08)
            elif p.dim() == 1:
                if "bias" in n:
                    p.normal_(0, 0.05)
                else:
                    p.uniform_(0.8, 1.2)
    d = os.path.join(out, f"model_{name}")
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    layer0 = {}
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        for k in f.keys():
            if k.startswith("model.layers.0."):
                layer0[k] = list(f.get_slice(k).get_shape())
    m = None
    if is_moe:
        try:  # eager experts (a plain loop over experts), where the option exists
            m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                     experts_implementation="eager").eval()
        except Exception:
            traceback.print_exc()
    if m is None:
        m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    mem0 = {k: list(v.shape) for k, v in m.state_dict().items()
            if k.startswith("model.layers.0.")}
    with torch.no_grad():
        logits = m(ids[None]).logits[0].float()
        seq = ids.tolist()
        for _ in range(G):
            nxt = int(m(torch.tensor([seq])).logits[0, -1].argmax())
            seq.append(nxt)
    save_file({"ids": ids.to(torch.int32), "logits": logits.contiguous(),
               "greedy": torch.tensor(seq[T:], dtype=torch.int32)},
              os.path.join(d, "expected.safetensors"))
    res = {"logit_range": float(logits.max() - logits.min()), "greedy": seq[T:]}
    if True:
        # perplexity of a longer fixed sequence, unquantized and fake-quantized
        # per online scheme: octet's must agree within 0.1% (tests/test_model*.c)
        g2 = torch.Generator().manual_seed(11)
        long_ids = torch.randint(3, V, (4, 256), generator=g2)  # 4 windows
        fq = {"bf16": ppl_of(m, long_ids)}
        for scheme in FQ_SCHEMES:
            fm = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
            if is_moe:
                try:
                    fq[scheme] = ppl_of(moe_fake_quant(fm, cfg, scheme), long_ids)
                except Exception:
                    traceback.print_exc()
            else:
                fq[scheme] = ppl_of(fake_quant(fm, scheme), long_ids)
        json.dump({"ids": long_ids.tolist(), "ppl": fq},
                  open(os.path.join(d, "fakequant.json"), "w"), indent=1)
        res["fakequant_ppl"] = fq
    if is_moe:
        res["saved_layer0"] = layer0
        res["memory_layer0"] = mem0
        if set(mem0) != set(layer0):
            # transformers holds the experts differently in memory (fused 3-D
            # tensors): write that layout too, same weights, same expected logits.
            fd = os.path.join(out, f"model_{name}_fused")
            os.makedirs(fd, exist_ok=True)
            shutil.copy(os.path.join(d, "config.json"), fd)
            shutil.copy(os.path.join(d, "expected.safetensors"), fd)
            sd = {k: v.detach().to(torch.bfloat16).contiguous().clone()
                  for k, v in m.state_dict().items()}
            if getattr(cfg, "tie_word_embeddings", False):
                sd.pop("lm_head.weight", None)
            save_file(sd, os.path.join(fd, "model.safetensors"), metadata={"format": "pt"})
            res["fused_dir"] = f"model_{name}_fused"
    return res



# ---------------------------------------------------------------- fake quant
# octet's online schemes written with torch ops (docs/NUMERICS.md, docs/KERNELS.md
# §Semantics):
# q/k/v and gate/up quantized as the fused matrices octet and vLLM run;
# activations per token (fp8_per_tensor), 1x128 groups (fp8_per_block, the
# last group of a row partial) or 1x32 MX blocks (mxfp8, OCP recipe).  The
# matmul is W8A8 as docs/KERNELS.md §Semantics defines it: FP8 codes multiplied exactly,
# accumulated, and scaled in the epilogue -- Y = sa * (sb * sum(a*b)) for
# per-token x per-tensor, and sum over K blocks of (sum_kb(a*b) * sa) * sb for
# blocks and MX -- not a matmul of dequantized values (that rounds every
# product's scale multiplication and drifts by up to 0.14% in perplexity on
# these tiny models).  Dense architectures only.
QMAX = 448.0


def _e4(x):
    return x.clamp(-QMAX, QMAX).to(torch.float8_e4m3fn).float()


def _div(a, b):
    return a / torch.full_like(a, b)


def q_w_tensor(w):
    s = torch.clamp(_div(w.abs().amax(), QMAX), min=1 / (QMAX * 512))
    return _e4(w * torch.reciprocal(s)), s


def q_a_token(x):
    s = torch.clamp(_div(x.abs().amax(dim=-1, keepdim=True), QMAX), min=1 / (QMAX * 512))
    return _e4(x / s), s


def q_w_blocks(w, b):
    n, k = w.shape
    bn, bk = -(-n // b), -(-k // b)
    wp = torch.nn.functional.pad(w, (0, bk * b - k, 0, bn * b - n)).reshape(bn, b, bk, b)
    s = _div(wp.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4), QMAX)
    q = _e4(wp * (1.0 / s)).reshape(bn * b, bk * b)[:n, :k]
    return q, s.reshape(bn, bk)


def q_a_groups(x, g):
    k = x.shape[-1]
    kg = -(-k // g)
    xp = torch.nn.functional.pad(x, (0, kg * g - k)).reshape(*x.shape[:-1], kg, g)
    s = torch.clamp(_div(xp.abs().amax(dim=-1, keepdim=True), QMAX), min=1 / (QMAX * 512))
    return _e4(xp / s).reshape(*x.shape[:-1], kg * g)[..., :k], s[..., 0]


def q_mx(x):
    sh = x.shape
    xb = x.reshape(*sh[:-1], sh[-1] // 32, 32)
    am = xb.abs().amax(dim=-1, keepdim=True)
    e = torch.frexp(am)[1] - 1
    e = torch.where(am == 0, torch.zeros_like(e), torch.clamp(e - 8 + 127, 0, 254))
    sc = torch.exp2((e - 127).double()).float()
    return _e4(xb / sc).reshape(sh), sc[..., 0]


def _dot(a, b):
    """Sum of exact FP8 products (float64, rounded once to float32)."""
    return (a.double() @ b.double().t()).float()


class _FQLinear(torch.nn.Module):
    def __init__(self, w, b, scheme):
        super().__init__()
        self.scheme, self.b = scheme, b
        if scheme == "fp8_per_tensor":
            self.wq, self.ws = q_w_tensor(w)
        elif scheme == "FP8_DYNAMIC":  # per-channel weights (the export), per-token activations
            self.wq, ws = q_a_token(w)
            self.ws = ws[:, 0]  # [N]
        elif scheme == "fp8_per_block":
            self.wq, ws = q_w_blocks(w, 128)  # ws [ceil(N/128), ceil(K/128)]
            self.ws = ws.repeat_interleave(128, dim=0)[:w.shape[0]]  # per row: [N, KB]
        else:
            self.wq, self.ws = q_mx(w)  # ws [N, K/32]

    def forward(self, x):
        sh = x.shape
        x = x.float().reshape(-1, sh[-1])
        k = x.shape[-1]
        if self.scheme in ("fp8_per_tensor", "FP8_DYNAMIC"):
            aq, sa = q_a_token(x)
            sb = self.ws if self.ws.dim() == 0 else self.ws[None, :]
            y = sa * (sb * _dot(aq, self.wq))
        else:
            g = 128 if self.scheme == "fp8_per_block" else 32
            aq, sa = q_a_groups(x, 128) if g == 128 else q_mx(x)
            y = None
            for kb in range(-(-k // g)):
                c0, c1 = kb * g, min(k, kb * g + g)
                acc = _dot(aq[:, c0:c1], self.wq[:, c0:c1])
                t = (acc * sa[:, kb:kb + 1]) * self.ws[:, kb][None, :]
                y = t if y is None else y + t
        if self.b is not None:
            y = y + self.b
        return y.reshape(*sh[:-1], -1)


def fake_quant(model, scheme):
    for layer in model.model.layers:
        for parent, groups in ((layer.self_attn, (("q_proj", "k_proj", "v_proj"), ("o_proj",))),
                               (getattr(layer, "mlp", None), (("gate_proj", "up_proj"),
                                                              ("down_proj",)))):
            if parent is None or not hasattr(parent, groups[0][0]):
                continue  # MoE layers: handled by moe_fake_quant
            for names in groups:
                lins = [getattr(parent, n) for n in names]
                fused = _FQLinear(torch.cat([l.weight.detach().float() for l in lins]), None,
                                  scheme)
                r = 0
                for n, l in zip(names, lins):
                    rows = l.weight.shape[0]
                    part = _FQLinear.__new__(_FQLinear)
                    torch.nn.Module.__init__(part)
                    part.scheme = scheme
                    part.b = None if l.bias is None else l.bias.detach().float()
                    part.wq = fused.wq[r:r + rows]
                    # the fused unit's scales, restricted to this shard's rows
                    part.ws = fused.ws if scheme == "fp8_per_tensor" else fused.ws[r:r + rows]
                    setattr(parent, n, part)
                    r += rows
    return model


FQ_SCHEMES = ("fp8_per_tensor", "fp8_per_block", "mxfp8")



# MoE: octet's expert path written with torch ops, checked first against
# transformers' own (unquantized) MoE block output on the same input.  Routing:
# softmax over all experts (GraniteMoe: over the top-k logits), top-k, weights
# renormalised over the chosen experts unless norm_topk_prob is false; each
# expert runs fused gate/up then down; outputs combined in f32 in top-k order.
# fp8_per_tensor experts use vLLM's fused-MoE activations: ONE dynamic
# per-tensor scale over the whole batch (the block input for gate/up, all
# routed rows' intermediates for down); the other schemes as dense layers.
def _moe_parts(block):
    """(router [E, H], gate_up [E, 2I, H], down [E, H, I]) from a MoE block."""
    sd = {k: v.detach().float() for k, v in block.state_dict().items()}
    gu = [v for k, v in sd.items() if v.dim() == 3 and ("gate_up" in k or "input_linear" in k)]
    dn = [v for k, v in sd.items() if v.dim() == 3 and ("down" in k or "output_linear" in k)]
    rt = [v for k, v in sd.items() if v.dim() == 2 and ("gate" in k or "router" in k)
          and "gate_up" not in k]
    if len(gu) != 1 or len(dn) != 1 or len(rt) != 1:
        raise RuntimeError("unexpected MoE parameters: %s" % {k: tuple(v.shape) for k, v in sd.items()})
    return rt[0], gu[0], dn[0]


def _w8a8(x, w, scheme, sa_tensor=None):
    """y = x W^T as octet computes it for one scheme (x, w f32)."""
    if scheme is None:
        return x @ w.t()
    if scheme == "fp8_per_tensor":
        wq, ws = q_w_tensor(w)
        aq, sa = sa_tensor
        return sa * (ws * _dot(aq, wq))
    lin = _FQLinear(w, None, scheme)
    return lin(x)


def moe_ref(block, x, k, norm, softmax_over_topk, scheme):
    router, gu, dn = _moe_parts(block)
    E, I2 = gu.shape[0], gu.shape[1]
    I = I2 // 2
    logits = x @ router.t()
    if softmax_over_topk:
        tv, ti = torch.topk(logits, k, dim=-1)
        w = torch.softmax(tv, dim=-1)
    else:
        probs = torch.softmax(logits, dim=-1)
        w, ti = torch.topk(probs, k, dim=-1)
        if norm:
            w = w / w.sum(dim=-1, keepdim=True)
    n = x.shape[0]
    rows = [[(t, j) for t in range(n) for j in range(k) if int(ti[t, j]) == e] for e in range(E)]
    s_in = q_a_tensor(x) if scheme == "fp8_per_tensor" else None
    mids = {}
    for e in range(E):
        if not rows[e]:
            continue
        toks = torch.tensor([t for t, _ in rows[e]])
        xe = x[toks]
        sa = (s_in[0][toks], s_in[1]) if s_in is not None else None
        g_u = _w8a8(xe, gu[e], scheme, sa)
        mids[e] = torch.nn.functional.silu(g_u[:, :I]) * g_u[:, I:]
    s_mid = None
    if scheme == "fp8_per_tensor":
        s_mid = q_a_tensor(torch.cat([mids[e] for e in sorted(mids)]))
        s_mid = (None, s_mid[1])
    out = torch.zeros_like(x)
    outs = {}
    for e in sorted(mids):
        a = mids[e]
        sa = None
        if s_mid is not None:
            sa = (_e4(a * torch.reciprocal(s_mid[1])), s_mid[1])
        outs[e] = _w8a8(a, dn[e], scheme, sa)
    for t in range(n):
        acc = torch.zeros(x.shape[1])
        for j in range(k):
            e = int(ti[t, j])
            r = [i for i, (tt, jj) in enumerate(rows[e]) if tt == t and jj == j][0]
            acc = acc + outs[e][r] * w[t, j]
        out[t] = acc
    return out


def q_a_tensor(x):
    s = torch.clamp(_div(x.abs().amax(), QMAX), min=1 / (QMAX * 512))
    return _e4(x * torch.reciprocal(s)), s


class _MoERef(torch.nn.Module):
    def __init__(self, orig, k, norm, over_topk, scheme, returns_tuple):
        super().__init__()
        self.orig, self.k, self.norm, self.over_topk = orig, k, norm, over_topk
        self.scheme, self.returns_tuple = scheme, returns_tuple

    def forward(self, hidden_states, *args, **kwargs):
        sh = hidden_states.shape
        y = moe_ref(self.orig, hidden_states.reshape(-1, sh[-1]).float(), self.k, self.norm,
                    self.over_topk, self.scheme).reshape(sh)
        return (y, None) if self.returns_tuple else y


def moe_fake_quant(model, cfg, scheme, check_x=None):
    k = cfg.num_experts_per_tok
    norm = bool(getattr(cfg, "norm_topk_prob", True))
    over_topk = cfg.model_type == "granitemoe"
    for layer in model.model.layers:
        for pname, mod in list(layer.named_children()):
            if not hasattr(mod, "experts"):
                continue
            probe = torch.randn(5, cfg.hidden_size, generator=torch.Generator().manual_seed(3))
            with torch.no_grad():
                ref = mod(probe[None])
            tup = isinstance(ref, tuple)
            ref = ref[0] if tup else ref
            mine = moe_ref(mod, probe, k, norm, over_topk, None)
            err = float((ref.reshape(mine.shape) - mine).abs().max())
            if err > 1e-4:
                raise RuntimeError("MoE reference differs from transformers by %g" % err)
            setattr(layer, pname, _MoERef(mod, k, norm, over_topk, scheme, tup))
    if scheme is not None:
        fake_quant(model, scheme)  # attention linears as in the dense models
    return model

def ppl_of(model, windows):
    """Perplexity over windows scored independently (each from an empty context)."""
    nll, count = 0.0, 0
    with torch.no_grad():
        for ids in windows:
            lp = torch.log_softmax(model(ids[None]).logits[0].float()[:-1], dim=-1)
            nll -= float(lp.gather(1, ids[1:, None]).sum())
            count += len(ids) - 1
    return math.exp(nll / count)

def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, V, (T,), generator=g)
    summary = {}
    for idx, (name, make_cfg) in enumerate(configs()):
        try:
            summary[name] = make_one(out, idx, name, make_cfg(), ids)
        except Exception:  # keep going: the other fixtures are still useful
            traceback.print_exc()
            summary[name] = {"error": traceback.format_exc()}
        print(name, summary[name], flush=True)
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
