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
