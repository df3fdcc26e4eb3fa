#!/usr/bin/env python3
"""Golden logits from transformers for octet's model runtime.

    python3 tools/make_model_fixtures.py OUTDIR      (transformers 5.x, PyTorch)

For each architecture, a tiny randomly initialised model (seeded) is saved in
BF16 as a Hugging Face folder OUTDIR/model_<arch>/ (config.json,
model.safetensors), then loaded back in float32 (the BF16 weights widened
exactly) and run on a fixed id sequence.  OUTDIR/model_<arch>/expected.safetensors
holds:
  * "ids"         I32[T]      the input ids
  * "logits"      F32[T, V]   fp32 logits for every position
  * "greedy"      I32[G]      greedy continuation of `ids` (G tokens, no EOS stop)
octet computes the same with --dtype float32 (tests/test_model.c).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, GraniteConfig, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)

V, H, I, L = 512, 128, 256, 2
T, G = 24, 12


def configs():
    common = dict(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    yield "llama", LlamaConfig(**common, tie_word_embeddings=True, rope_theta=10000.0,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 64})
    yield "mistral", MistralConfig(**common, sliding_window=8, rope_theta=10000.0,
                                   tie_word_embeddings=False)
    yield "qwen2", Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=False,
                               use_sliding_window=False)
    yield "qwen3", Qwen3Config(**common, head_dim=48, rope_theta=1000000.0,
                               tie_word_embeddings=True, attention_bias=False)
    yield "granite", GraniteConfig(**common, embedding_multiplier=12.0, residual_multiplier=0.22,
                                   attention_multiplier=0.0078125, logits_scaling=8.0,
                                   tie_word_embeddings=True, rope_theta=10000.0)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, V, (T,), generator=g)
    summary = {}
    for idx, (name, cfg) in enumerate(configs()):
        torch.manual_seed(100 + idx)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        with torch.no_grad():  # larger weights than the default init: logits that mean something
            for n, p in model.named_parameters():
                if p.dim() == 2:
                    p.normal_(0, 0.08)
                elif p.dim() == 1:
                    if "bias" in n:
                        p.normal_(0, 0.05)
                    else:
                        p.uniform_(0.8, 1.2)
        d = os.path.join(out, f"model_{name}")
        model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
        m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        with torch.no_grad():
            logits = m(ids[None]).logits[0].float()
            seq = ids.tolist()
            for _ in range(G):
                nxt = int(m(torch.tensor([seq])).logits[0, -1].argmax())
                seq.append(nxt)
        save_file({"ids": ids.to(torch.int32), "logits": logits.contiguous(),
                   "greedy": torch.tensor(seq[T:], dtype=torch.int32)},
                  os.path.join(d, "expected.safetensors"))
        summary[name] = {"logit_range": float(logits.max() - logits.min()),
                         "greedy": seq[T:]}
        print(name, summary[name], flush=True)
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
