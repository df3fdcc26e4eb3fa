#!/usr/bin/env python3
"""Checks that transformers loads an `octet quantize --format fp8` export
(its FineGrainedFP8 integration) and computes the same model as octet's
dequantized weights.  Needs a CUDA GPU, torch, transformers, safetensors (the
H200 machine has torch 2.11, transformers 5.17, safetensors 0.8).

    make && python3 tools/make_checkpoint_fixtures.py /tmp/fx
    ./build/octet quantize --model /tmp/fx/hf/bf16 --scheme FP8_BLOCK --format fp8 \
        --out /tmp/fx/export_fp8
    python3 tools/check_transformers_load.py /tmp/fx/export_fp8 [--out RESULT.json]

Steps:
1. AutoModelForCausalLM.from_pretrained(EXPORT) on cuda: transformers sees
   quant_method "fp8" and swaps the Linear layers for its FP8 layers.
2. Weights: every FP8 layer's (fp8 weight, weight_scale_inv) as transformers
   holds them, dequantized, must equal the dequantization of the export's
   safetensors bit for bit (the same bytes and scales reached the model).
3. Reference model: the same config without quantization_config, weights =
   the export's tensors dequantized in f32 (codes.float() x block scale).
4. Logits on random token ids: transformers' FP8 model (W8A8 with dynamic
   1x128 activation groups) against the reference in f32 and in bf16: relative
   Frobenius error, max abs error, top-1 agreement.
Prints one JSON object (and writes it with --out); exit status 1 if a check
fails (weights not identical, a reference weight missing, or rel error > 0.1).
"""
import argparse
import glob
import json
import os
import sys


def dequant_export(path, torch, load_file):
    """{name: tensor} of the export with FP8 weights dequantized to f32."""
    raw = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        raw.update(load_file(f))
    out = {}
    for name, t in raw.items():
        if name.endswith((".weight_scale_inv", ".weight_scale", ".input_scale")):
            continue
        if t.dtype == torch.float8_e4m3fn:
            mod = name[: -len(".weight")]
            if mod + ".weight_scale_inv" in raw:
                s = raw[mod + ".weight_scale_inv"].float()
                n, k = t.shape
                bn, bk = -(-n // s.shape[0]), -(-k // s.shape[1])
                full = s.repeat_interleave(bn, 0).repeat_interleave(bk, 1)[:n, :k]
            else:
                full = raw[mod + ".weight_scale"].float()
            out[name] = t.float() * full
        else:
            out[name] = t
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--out")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()

    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    dev = "cuda"
    res = {"export": a.export, "torch": torch.__version__,
           "transformers": transformers.__version__, "device": torch.cuda.get_device_name(0)}
    with open(os.path.join(a.export, "config.json")) as f:
        res["quantization_config"] = json.load(f).get("quantization_config")

    qmodel = AutoModelForCausalLM.from_pretrained(a.export, device_map=dev,
                                                  dtype=torch.bfloat16)
    qmodel.eval()
    deq = dequant_export(a.export, torch, load_file)

    # 2. the FP8 layers hold exactly the export's bytes and scales
    n_fp8, mismatched = 0, []
    for name, mod in qmodel.named_modules():
        w = getattr(mod, "weight", None)
        if w is None or w.dtype != torch.float8_e4m3fn:
            continue
        n_fp8 += 1
        s = getattr(mod, "weight_scale_inv", None)
        if s is None:
            s = getattr(mod, "weight_scale")
        s = s.float().cpu()
        wt = w.float().cpu()
        n, k = wt.shape
        if s.numel() > 1:
            bn, bk = -(-n // s.shape[0]), -(-k // s.shape[1])
            s = s.repeat_interleave(bn, 0).repeat_interleave(bk, 1)[:n, :k]
        if not torch.equal(wt * s, deq[name + ".weight"]):
            mismatched.append(name)
    res["fp8_layers"] = n_fp8
    res["weights_identical"] = n_fp8 > 0 and not mismatched
    res["weight_mismatches"] = mismatched[:10]
    res["fp8_layer_class"] = sorted({type(m).__name__ for _, m in qmodel.named_modules()
                                     if getattr(getattr(m, "weight", None), "dtype", None)
                                     == torch.float8_e4m3fn})

    # 3. reference model from the dequantized weights
    cfg = AutoConfig.from_pretrained(a.export)
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    ref = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    missing, unexpected = ref.load_state_dict({k: v.float() for k, v in deq.items()},
                                              strict=False)
    missing = [m for m in missing if "rotary" not in m]
    res["ref_missing"], res["ref_unexpected"] = missing, unexpected
    ref = ref.to(dev).eval()

    # 4. logits
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.tokens), generator=g).to(dev)
    with torch.no_grad():
        lr = ref(ids).logits.float()
        try:
            lq = qmodel(ids).logits.float()
            res["fp8_forward"] = "transformers FP8 kernels (W8A8)"
        except ImportError as e:
            # transformers' FP8 matmul needs the `kernels` package; without it,
            # load the export again with transformers' own dequantization
            # (FineGrainedFP8Config(dequantize=True)): that still checks that
            # transformers reads our scales the way we wrote them.
            res["fp8_forward"] = "unavailable (%s); used dequantize=True" % str(e)[:160]
            from transformers import FineGrainedFP8Config
            dq = AutoModelForCausalLM.from_pretrained(
                a.export, device_map=dev, dtype=torch.float32,
                quantization_config=FineGrainedFP8Config(dequantize=True)).eval()
            lq = dq(ids).logits.float()
        lr16 = ref.to(torch.bfloat16)(ids).logits.float()
    for tag, r in (("f32", lr), ("bf16", lr16)):
        res["rel_fro_vs_%s" % tag] = float((lq - r).norm() / r.norm())
        res["max_abs_vs_%s" % tag] = float((lq - r).abs().max())
        res["top1_agree_vs_%s" % tag] = float((lq.argmax(-1) == r.argmax(-1)).float().mean())
    res["bf16_ref_rel_fro_vs_f32"] = float((lr16 - lr).norm() / lr.norm())
    # top-1 agreement is reported, not required: a tiny random model has
    # near-uniform logits whose argmax any rounding can flip.
    ok = res["weights_identical"] and not missing and res["rel_fro_vs_f32"] < 0.1
    res["pass"] = bool(ok)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
