#!/usr/bin/env python3
"""make_hf_config_fixtures.py — writes tests/fixtures/hf_configs/<name>/.

Each fixture is a config.json (and generation_config.json where the model
publishes one) as published on the Hugging Face Hub, with ONLY the size
fields substituted by small values so that tests/test_hf_configs.c can write
random weights for it (hidden_size, intermediate_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim, vocab_size, expert counts
and sizes; and layer-name lists that follow num_hidden_layers).  Every other
field — transformers_version, torch_dtype, rope_scaling, eos ids, the
quantization_config — keeps its published value.

The published texts are held below, each with where it was found (SOURCES)
and which fields are reconstructed rather than copied (a verbatim copy could
not be found offline for every file).  Each fixture also gets expect.json:
what octet must report for it, written here by hand from vLLM's rules (never
from octet's output), and README.md with the source and the substitutions.

Usage: python3 tools/make_hf_config_fixtures.py [OUT]   (stdlib only;
default OUT = tests/fixtures/hf_configs)
"""
import json
import os
import sys

# ---------------------------------------------------------------- texts
LLAMA31_8B_INSTRUCT = r'''{
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [
    128001,
    128008,
    128009
  ],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3",
  "use_cache": true,
  "vocab_size": 128256
}'''

LLAMA31_8B_INSTRUCT_GEN = r'''{
  "bos_token_id": 128000,
  "do_sample": true,
  "eos_token_id": [
    128001,
    128008,
    128009
  ],
  "temperature": 0.6,
  "top_p": 0.9,
  "transformers_version": "4.42.3"
}'''

MISTRAL_7B_INSTRUCT_V03 = r'''{
  "architectures": [
    "MistralForCausalLM"
  ],
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0",
  "use_cache": true,
  "vocab_size": 32768
}'''

MISTRAL_7B_V01 = r'''{
  "architectures": [
    "MistralForCausalLM"
  ],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}'''

QWEN25_7B_INSTRUCT = r'''{
  "architectures": [
    "Qwen2ForCausalLM"
  ],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "max_position_embeddings": 32768,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 152064
}'''

QWEN25_7B_INSTRUCT_GEN = r'''{
  "bos_token_id": 151643,
  "pad_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [
    151645,
    151643
  ],
  "repetition_penalty": 1.05,
  "temperature": 0.7,
  "top_p": 0.8,
  "top_k": 20,
  "transformers_version": "4.37.0"
}'''

QWEN3_8B = r'''{
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}'''

QWEN3_GEN = r'''{
  "bos_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [
    151645,
    151643
  ],
  "pad_token_id": 151643,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
}'''

QWEN3_30B_A3B = r'''{
  "architectures": [
    "Qwen3MoeForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}'''

MIXTRAL_8X7B_V01 = r'''{
  "architectures": [
    "MixtralForCausalLM"
  ],
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mixtral",
  "num_attention_heads": 32,
  "num_experts_per_tok": 2,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "num_local_experts": 8,
  "output_router_logits": false,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.02,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}'''

GRANITE_33_8B_INSTRUCT = r'''{
  "architectures": [
    "GraniteForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attention_multiplier": 0.0078125,
  "bos_token_id": 0,
  "embedding_multiplier": 12.0,
  "eos_token_id": 0,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12800,
  "logits_scaling": 16.0,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "granite",
  "num_attention_heads": 32,
  "num_hidden_layers": 40,
  "num_key_value_heads": 8,
  "pad_token_id": 0,
  "residual_multiplier": 0.22,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.49.0",
  "use_cache": true,
  "vocab_size": 49159
}'''

# DeepSeek-V3's quantization_config, verbatim (deepseek-ai/DeepSeek-V3 config.json).
DEEPSEEK_V3_QC = r'''{
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [
      128,
      128
    ]
  }'''

# llm-compressor / compressed-tensors (July 2024 era: "compression_config",
# status "frozen"), RedHatAI (ex neuralmagic) Meta-Llama-3.1-8B-Instruct-FP8-dynamic.
CT_FP8_DYNAMIC_QC = r'''{
    "config_groups": {
      "group_0": {
        "input_activations": {
          "block_structure": null,
          "dynamic": true,
          "group_size": null,
          "num_bits": 8,
          "observer": "memoryless",
          "observer_kwargs": {},
          "strategy": "token",
          "symmetric": true,
          "type": "float"
        },
        "output_activations": null,
        "targets": [
          "Linear"
        ],
        "weights": {
          "block_structure": null,
          "dynamic": false,
          "group_size": null,
          "num_bits": 8,
          "observer": "minmax",
          "observer_kwargs": {},
          "strategy": "channel",
          "symmetric": true,
          "type": "float"
        }
      }
    },
    "format": "float-quantized",
    "global_compression_ratio": 1.2405356243234333,
    "ignore": [
      "lm_head"
    ],
    "kv_cache_scheme": null,
    "quant_method": "compressed-tensors",
    "quantization_status": "frozen"
  }'''

CT_FP8_STATIC_QC = r'''{
    "config_groups": {
      "group_0": {
        "input_activations": {
          "block_structure": null,
          "dynamic": false,
          "group_size": null,
          "num_bits": 8,
          "observer": "minmax",
          "observer_kwargs": {},
          "strategy": "tensor",
          "symmetric": true,
          "type": "float"
        },
        "output_activations": null,
        "targets": [
          "Linear"
        ],
        "weights": {
          "block_structure": null,
          "dynamic": false,
          "group_size": null,
          "num_bits": 8,
          "observer": "minmax",
          "observer_kwargs": {},
          "strategy": "tensor",
          "symmetric": true,
          "type": "float"
        }
      }
    },
    "format": "float-quantized",
    "global_compression_ratio": 1.240844678218891,
    "ignore": [
      "lm_head"
    ],
    "kv_cache_scheme": null,
    "quant_method": "compressed-tensors",
    "quantization_status": "frozen"
  }'''

# llm-compressor FP8_BLOCK preset (compressed-tensors >= 0.11 writes
# "sparsity_config": {} and "transform_config": {}), as its
# examples/quantization_w8a8_fp8/fp8_block_example.py saves Qwen3-30B-A3B.
CT_FP8_BLOCK_QC = r'''{
    "config_groups": {
      "group_0": {
        "format": "float-quantized",
        "input_activations": {
          "actorder": null,
          "block_structure": null,
          "dynamic": true,
          "group_size": 128,
          "num_bits": 8,
          "observer": null,
          "observer_kwargs": {},
          "strategy": "group",
          "symmetric": true,
          "type": "float"
        },
        "output_activations": null,
        "targets": [
          "Linear"
        ],
        "weights": {
          "actorder": null,
          "block_structure": [
            128,
            128
          ],
          "dynamic": false,
          "group_size": null,
          "num_bits": 8,
          "observer": "minmax",
          "observer_kwargs": {},
          "strategy": "block",
          "symmetric": true,
          "type": "float"
        }
      }
    },
    "format": "float-quantized",
    "global_compression_ratio": null,
    "ignore": [
      "lm_head",
      "re:.*mlp.gate$"
    ],
    "kv_cache_scheme": null,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
    "sparsity_config": {},
    "transform_config": {},
    "version": "0.11.0"
  }'''

QUARK_SPEC = {"ch_axis": None, "dtype": "fp8_e4m3", "group_size": None, "is_dynamic": False,
              "observer_cls": "PerTensorMinMaxObserver", "qscheme": "per_tensor",
              "round_method": "half_even", "scale_type": "float", "symmetric": True}
# amd/Llama-3.1-8B-Instruct-FP8-KV (AMD Quark export, kv_cache_group).
def quark_qc():
    layer = {"bias": None, "input_tensors": dict(QUARK_SPEC), "output_tensors": dict(QUARK_SPEC),
             "weight": dict(QUARK_SPEC)}
    return {
        "activation_scheme": "static",
        "algo_config": None,
        "exclude": ["lm_head"],
        "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.0,
                   "pack_method": "reorder", "weight_format": "real_quantized",
                   "weight_merge_groups": None},
        "global_quant_config": {"bias": None, "input_tensors": dict(QUARK_SPEC),
                                "output_tensors": None, "target_device": None,
                                "weight": dict(QUARK_SPEC)},
        "layer_quant_config": {"*k_proj": layer, "*v_proj": json.loads(json.dumps(layer))},
        "layer_type_quant_config": {},
        "quant_method": "quark",
        "quant_mode": "eager_mode",
    }

LLAMA31_405B_INSTRUCT = r'''{
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [
    128001,
    128008,
    128009
  ],
  "hidden_act": "silu",
  "hidden_size": 16384,
  "initializer_range": 0.02,
  "intermediate_size": 53248,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 128,
  "num_hidden_layers": 126,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "quantization_config": {
    "activation_scale_ub": 1200.0,
    "modules_to_not_convert": [],
    "quant_method": "fbgemm_fp8"
  },
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}'''

# ---------------------------------------------------------------- sources
STORE_MD = ("a GitHub Markdown file in the search tool's code corpus (stored file id "
            "61558565367, a dump of config.json files of popular Hub models; repository name "
            "not shown by the tool)")
SRC = {
    "llama31": ("meta-llama/Llama-3.1-8B-Instruct", "config.json verbatim from " + STORE_MD +
                "; the same fields (base model) also appear in NVIDIA/TensorRT-LLM tests"),
    "llama31_gen": "generation_config.json: reconstructed from memory of the Hub file "
                   "(eos list, do_sample, temperature 0.6, top_p 0.9, transformers_version)",
}

D = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
         num_key_value_heads=2, vocab_size=512)


def fixture(name, repo, cfg_text, source, reconstructed, subs, gen_text=None, gen_note=None,
            qc=None, qc_key="quantization_config", qc_note=None, extra=None, expect=None):
    return dict(name=name, repo=repo, cfg_text=cfg_text, source=source,
                reconstructed=reconstructed, subs=subs, gen_text=gen_text, gen_note=gen_note,
                qc=qc, qc_key=qc_key, qc_note=qc_note, extra=extra, expect=expect)


def fbgemm_not_convert(n_layers):
    """Meta's FP8 405B quantizes only the MLPs of the inner layers: every
    attention projection, the first and last layer's MLP and lm_head stay BF16."""
    out = []
    for l in range(n_layers):
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out.append(f"model.layers.{l}.self_attn.{p}")
    for l in (0, n_layers - 1):
        for p in ("gate_proj", "up_proj", "down_proj"):
            out.append(f"model.layers.{l}.mlp.{p}")
    out.append("lm_head")
    return out


LLAMA_EOS = [128001, 128008, 128009]
FIXTURES = [
    fixture("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", LLAMA31_8B_INSTRUCT,
            "config.json verbatim from " + STORE_MD, [], D,
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"],
            expect=dict(format="bf16", scheme="unquantized", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=LLAMA_EOS)),
    fixture("mistral-7b-instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3",
            MISTRAL_7B_INSTRUCT_V03, "config.json verbatim from " + STORE_MD, [], D,
            expect=dict(format="bf16", scheme="unquantized", max_model_len=32768,
                        max_model_len_key="max_position_embeddings", eos=[2])),
    fixture("mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1", MISTRAL_7B_V01,
            "reconstructed from memory of the Hub file (no verbatim copy found offline)",
            ["every field (values as published to the best of our knowledge: sliding_window "
             "4096, rope_theta 10000.0, vocab 32000, transformers_version 4.34.0.dev0)"], D,
            expect=dict(format="bf16", scheme="unquantized", max_model_len=32768,
                        max_model_len_key="max_position_embeddings", eos=[2])),
    fixture("qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct", QWEN25_7B_INSTRUCT,
            "config.json verbatim from " + STORE_MD, [], D,
            gen_text=QWEN25_7B_INSTRUCT_GEN,
            gen_note="generation_config.json: reconstructed from memory of the Hub file",
            expect=dict(format="bf16", scheme="unquantized", max_model_len=32768,
                        max_model_len_key="max_position_embeddings", eos=[151645, 151643])),
    fixture("qwen3-8b", "Qwen/Qwen3-8B", QWEN3_8B,
            "reconstructed: the fields match Qwen/Qwen3-8B-FP8's config.json as re-saved by "
            "transformers 5.7 in a GitHub report found with the search tool (same sizes, "
            "max_position_embeddings 40960, max_window_layers 36) and the Qwen3 4.51.0 configs",
            ["whole file (no verbatim copy of Qwen/Qwen3-8B/config.json found offline)"],
            dict(D, head_dim=64), gen_text=QWEN3_GEN,
            gen_note="generation_config.json: reconstructed from memory of the Hub file",
            expect=dict(format="bf16", scheme="unquantized", max_model_len=40960,
                        max_model_len_key="max_position_embeddings", eos=[151645, 151643])),
    fixture("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", QWEN3_30B_A3B,
            "config.json of Qwen3-30B-A3B as copied byte for byte in a Rust test "
            "(lmstudio-community/Qwen3-30B-A3B-MLX-4bit/config.json) found with find_string, "
            "minus the two keys MLX adds (quantization, quantization_config)",
            ["removal of MLX's quantization keys"],
            dict(D, head_dim=64, intermediate_size=512, moe_intermediate_size=128, num_experts=4,
                 num_experts_per_tok=2),
            expect=dict(format="bf16", scheme="unquantized", max_model_len=40960,
                        max_model_len_key="max_position_embeddings", eos=[151645])),
    fixture("mixtral-8x7b-v0.1", "mistralai/Mixtral-8x7B-v0.1", MIXTRAL_8X7B_V01,
            "config.json verbatim from a Markdown note citing "
            "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json (search "
            "tool, stored file id 21847056202); identical to NVIDIA/TensorRT-LLM's "
            "MIXTRAL_8X7B_CONFIG test dict", [],
            dict(D, intermediate_size=128, num_local_experts=4),
            expect=dict(format="bf16", scheme="unquantized", max_model_len=32768,
                        max_model_len_key="max_position_embeddings", eos=[2])),
    fixture("granite-3.3-8b-instruct", "ibm-granite/granite-3.3-8b-instruct",
            GRANITE_33_8B_INSTRUCT, "config.json verbatim from " + STORE_MD, [], D,
            expect=dict(format="bf16", scheme="unquantized", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=[0])),
    fixture("qwen3-8b-fp8", "Qwen/Qwen3-8B-FP8", QWEN3_8B,
            "Qwen3-8B's config (see qwen3-8b) plus the quantization_config Qwen3-8B-FP8 "
            "publishes; the quantization_config text is verbatim (same in DeepSeek-V3 and in "
            "the transformers-5.7 re-save of Qwen3-8B-FP8 found with find_string)",
            ["the base config (as qwen3-8b)"], dict(D, head_dim=64), gen_text=QWEN3_GEN,
            gen_note="generation_config.json: reconstructed (as qwen3-8b)",
            qc=DEEPSEEK_V3_QC,
            expect=dict(format="fp8", scheme="FP8_BLOCK", max_model_len=40960,
                        max_model_len_key="max_position_embeddings", eos=[151645, 151643])),
    fixture("llama-3.1-8b-instruct-deepseek-v3-fp8", "deepseek-ai/DeepSeek-V3 (quantization_config)",
            LLAMA31_8B_INSTRUCT,
            "Llama-3.1-8B-Instruct's config.json (verbatim, see llama-3.1-8b-instruct) with "
            "DeepSeek-V3's quantization_config block verbatim (from " + STORE_MD + ", which "
            "holds deepseek-ai/DeepSeek-V3/config.json). DeepSeek-V3's own architecture "
            "(DeepseekV3ForCausalLM, MLA) is not supported by octet, so its FP8 block config is "
            "carried by a supported architecture here", [], D,
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"], qc=DEEPSEEK_V3_QC,
            expect=dict(format="fp8", scheme="FP8_BLOCK", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=LLAMA_EOS)),
    fixture("llama-3.1-8b-instruct-fp8-dynamic", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
            LLAMA31_8B_INSTRUCT,
            "Llama-3.1-8B-Instruct's config.json (verbatim) plus llm-compressor's FP8_DYNAMIC "
            "compression_config", ["the compression_config block: reconstructed from memory of "
                                   "the Hub file (July 2024, compressed-tensors 0.4/0.5: key "
                                   "'compression_config', quantization_status 'frozen', "
                                   "observer 'memoryless'); global_compression_ratio may "
                                   "differ in its last digits"], D,
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"],
            qc=CT_FP8_DYNAMIC_QC, qc_key="compression_config",
            expect=dict(format="compressed-tensors", scheme="FP8_DYNAMIC", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=LLAMA_EOS)),
    fixture("llama-3.1-8b-instruct-fp8", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
            LLAMA31_8B_INSTRUCT,
            "Llama-3.1-8B-Instruct's config.json (verbatim) plus llm-compressor's static FP8 "
            "(tensor weights, static tensor input scales) compression_config",
            ["the compression_config block: reconstructed from memory of the Hub file (as the "
             "FP8-dynamic one, strategies tensor/tensor, input dynamic false)"], D,
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"],
            qc=CT_FP8_STATIC_QC, qc_key="compression_config",
            expect=dict(format="compressed-tensors", scheme="FP8 (static tensor)",
                        max_model_len=131072, max_model_len_key="max_position_embeddings",
                        eos=LLAMA_EOS)),
    fixture("qwen3-30b-a3b-fp8-block", "llm-compressor FP8_BLOCK (Qwen/Qwen3-30B-A3B)",
            QWEN3_30B_A3B,
            "Qwen3-30B-A3B's config.json (see qwen3-30b-a3b) plus the quantization_config "
            "llm-compressor's FP8_BLOCK preset writes (examples/quantization_w8a8_fp8/"
            "fp8_block_example.py: ignore lm_head and re:.*mlp.gate$)",
            ["the quantization_config block: reconstructed from the compressed-tensors "
             "QuantizationConfig fields (version 0.11.0, sparsity_config {}, transform_config {})"],
            dict(D, head_dim=64, intermediate_size=512, moe_intermediate_size=128, num_experts=4,
                 num_experts_per_tok=2), qc=CT_FP8_BLOCK_QC,
            expect=dict(format="compressed-tensors", scheme="FP8_BLOCK", max_model_len=40960,
                        max_model_len_key="max_position_embeddings", eos=[151645])),
    fixture("llama-3.1-8b-instruct-fp8-kv-quark", "amd/Llama-3.1-8B-Instruct-FP8-KV",
            LLAMA31_8B_INSTRUCT,
            "Llama-3.1-8B-Instruct's config.json (verbatim) plus AMD Quark's quantization_config "
            "with export.kv_cache_group", ["the quantization_config block: reconstructed from "
                                           "Quark's export format (global per-tensor static "
                                           "fp8_e4m3 weight + input, layer_quant_config for "
                                           "*k_proj / *v_proj with output_tensors = the KV "
                                           "scales) as vLLM's tests and Quark's code describe "
                                           "it"], D,
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"],
            qc=json.dumps(quark_qc()),
            expect=dict(format="quark", scheme="FP8 (static tensor)", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=LLAMA_EOS,
                        kv_quantized=True)),
    fixture("llama-3.1-405b-instruct-fp8", "meta-llama/Llama-3.1-405B-Instruct-FP8",
            LLAMA31_405B_INSTRUCT,
            "reconstructed: Llama-3.1-405B-Instruct's sizes on the Llama-3.1 config layout, "
            "with the fbgemm_fp8 quantization_config (activation_scale_ub 1200.0; "
            "modules_to_not_convert: every attention projection, the first and last layer's "
            "MLP and lm_head — Meta quantized only the inner MLPs, per-channel weights and "
            "per-token activations, as NVIDIA/TensorRT-LLM's Llama 3.1 405B notes say)",
            ["whole file from memory; modules_to_not_convert regenerated for the substituted "
             "num_hidden_layers"],
            dict(D, num_hidden_layers=3),
            gen_text=LLAMA31_8B_INSTRUCT_GEN, gen_note=SRC["llama31_gen"] + " (same as 8B)",
            extra=lambda c: c["quantization_config"].__setitem__(
                "modules_to_not_convert", fbgemm_not_convert(c["num_hidden_layers"])),
            expect=dict(format="fbgemm_fp8", scheme="FP8_DYNAMIC", max_model_len=131072,
                        max_model_len_key="max_position_embeddings", eos=LLAMA_EOS)),
]


def write(out_root):
    for f in FIXTURES:
        cfg = json.loads(f["cfg_text"])
        pub = {k: cfg.get(k) for k in f["subs"]}
        for k, v in f["subs"].items():
            cfg[k] = v
        if f["qc"]:
            # insert in sorted position as transformers writes (sort_keys)
            cfg[f["qc_key"]] = json.loads(f["qc"])
            cfg = dict(sorted(cfg.items()))
        if f["extra"]:
            f["extra"](cfg)
        d = os.path.join(out_root, f["name"])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as fh:
            fh.write(json.dumps(cfg, indent=2) + "\n")
        if f["gen_text"]:
            with open(os.path.join(d, "generation_config.json"), "w") as fh:
                fh.write(json.dumps(json.loads(f["gen_text"]), indent=2) + "\n")
        with open(os.path.join(d, "expect.json"), "w") as fh:
            fh.write(json.dumps(f["expect"], indent=2) + "\n")
        lines = [f"# {f['name']}", "",
                 f"Hub repository: `{f['repo']}`, files `config.json`" +
                 (" and `generation_config.json`" if f["gen_text"] else "") + ".", "",
                 f"Source of the text: {f['source']}.", ""]
        if f["reconstructed"]:
            lines.append("Reconstructed (not copied verbatim):")
            lines += [f"- {r}" for r in f["reconstructed"]]
            lines.append("")
        else:
            lines += ["Reconstructed: nothing in config.json (verbatim apart from the size "
                      "substitutions below).", ""]
        if f["gen_note"]:
            lines += [f"- {f['gen_note']}", ""]
        lines.append("Size substitutions (published -> fixture), for a small random model:")
        for k, v in f["subs"].items():
            lines.append(f"- `{k}`: {json.dumps(pub[k])} -> {json.dumps(v)}")
        if f["name"] == "llama-3.1-405b-instruct-fp8":
            lines.append("- `quantization_config.modules_to_not_convert`: regenerated for 3 "
                         "layers")
        lines += ["", "`expect.json` holds what octet must report (format, scheme, the "
                  "max_model_len vLLM derives, the eos ids used for stopping), written by hand "
                  "in `tools/make_hf_config_fixtures.py`.", "",
                  "Written by `python3 tools/make_hf_config_fixtures.py`; do not edit by hand.",
                  ""]
        with open(os.path.join(d, "README.md"), "w") as fh:
            fh.write("\n".join(lines))
    print(f"wrote {len(FIXTURES)} fixtures under {out_root}")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf_configs")
