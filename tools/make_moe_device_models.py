#!/usr/bin/env python3
"""Small MoE models in shapes the CUDA device runs, written by transformers.

    python3 tools/make_moe_device_models.py OUTDIR      (transformers 5.x, PyTorch)

tests/fixtures/models/ holds MoE models from transformers too (Mixtral,
Qwen3-MoE, GraniteMoe), but with head_dim 32/48 and expert widths of 64, which
the GPU's attention (head_dim 64 or 128) and grouped expert GEMM (K a multiple
of 128) do not take.  These are the same architectures at hidden 256, 4 query
/ 2 KV heads of 64, expert intermediate 128, 2 layers, vocab 512, randomly
initialised (seeded) and saved in BF16 by save_pretrained:

  OUTDIR/mixtral          8 experts, top-2, renormalised weights
  OUTDIR/qwen3_moe        16 experts, top-4, norm_topk_prob false, q/k norm
  OUTDIR/granitemoe       8 experts, top-2, softmax over the top-k, multipliers
  OUTDIR/<arch>_fused     the same weights as transformers holds them in memory
                          (fused 3-D expert tensors), where that differs

tests/test_model_device.c runs each on the GPU and on the CPU backend and
compares them (OCTET_MOE_MODELS=OUTDIR).  They are made on the GPU machine,
where PyTorch is, at the start of each run: too large to commit next to the
other fixtures.
"""
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, GraniteMoeConfig, MixtralConfig, Qwen3MoeConfig

COMMON = dict(vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
              bos_token_id=1, eos_token_id=2)


def configs():
    yield "mixtral", MixtralConfig(**COMMON, intermediate_size=128, num_local_experts=8,
                                   num_experts_per_tok=2, sliding_window=None,
                                   rope_theta=1000000.0, tie_word_embeddings=False,
                                   router_jitter_noise=0.0)
    yield "qwen3_moe", Qwen3MoeConfig(**COMMON, intermediate_size=384, head_dim=64,
                                      num_experts=16, num_experts_per_tok=4,
                                      moe_intermediate_size=128, norm_topk_prob=False,
                                      decoder_sparse_step=1, mlp_only_layers=[],
                                      rope_theta=1000000.0, tie_word_embeddings=False,
                                      attention_bias=False, use_sliding_window=False)
    yield "granitemoe", GraniteMoeConfig(**COMMON, intermediate_size=128, num_local_experts=8,
                                         num_experts_per_tok=2, embedding_multiplier=6.0,
                                         residual_multiplier=0.5, attention_multiplier=0.125,
                                         logits_scaling=4.0, tie_word_embeddings=True,
                                         rope_theta=10000.0)


def make(out, idx, name, cfg):
    torch.manual_seed(300 + idx)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # weights large enough for routing and logits that mean something
        for n, p in model.named_parameters():
            if p.dim() in (2, 3):
                p.normal_(0, 0.06)
            elif p.dim() == 1:
                p.uniform_(0.8, 1.2)
    d = os.path.join(out, name)
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    sd = {k: v.detach().contiguous().clone() for k, v in m.state_dict().items()}
    from safetensors import safe_open
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        saved = set(f.keys())
    if getattr(cfg, "tie_word_embeddings", False):
        sd.pop("lm_head.weight", None)
    if set(sd) != saved:  # the in-memory (fused) layout differs from the saved one
        fd = os.path.join(out, name + "_fused")
        os.makedirs(fd, exist_ok=True)
        shutil.copy(os.path.join(d, "config.json"), fd)
        save_file(sd, os.path.join(fd, "model.safetensors"), metadata={"format": "pt"})
        print(name, "saved", sorted(k for k in saved if ".layers.0.mlp" in k or
                                    ".layers.0.block_sparse_moe" in k)[:4],
              "in memory", sorted(k for k in sd if ".layers.0.mlp" in k or
                                  ".layers.0.block_sparse_moe" in k)[:4], flush=True)
    print(name, "written", flush=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for idx, (name, cfg) in enumerate(configs()):
        make(out, idx, name, cfg)


if __name__ == "__main__":
    main()
