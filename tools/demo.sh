#!/bin/bash
# make demo: octet's main job on the bundled demo model (models/demo, a 9.4 M
# parameter Llama trained on public-domain English by tools/train_demo_model.py):
#   1. load it with online FP8 (fp8_per_block) and show the plan and the memory
#   2. generate from a few prompts, streaming
#   3. a table per scheme: perplexity on held-out text, its change vs BF16, KL
#      divergence and top-1 agreement vs BF16, decode and prefill speed, bytes
#      -- for BF16, fp8_per_tensor, fp8_per_block, mxfp8 and an FP8_DYNAMIC
#      compressed-tensors export written by `octet quantize` and loaded back.
set -euo pipefail
BUILD=${BUILD:-build}
octet="$BUILD/octet"
model=models/demo
# Perplexity over all of models/demo/eval.txt (13 877 scored tokens), the text
# models/demo/README.md reports PyTorch's figures on; EVAL_TOKENS=N limits it.
EVAL_TOKENS=${EVAL_TOKENS:-0}
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# field NAME JSON: the number after "NAME": in a one-line JSON object
field() { sed -E "s/.*\"$1\":(-?[0-9.eE+-]+).*/\1/;t;s/.*/-/" <<<"$2"; }

echo "== octet $("$octet" --version | cut -d' ' -f2) on$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) threads"
"$octet" cpu | tail -1
echo
echo "== 1. load $model with online FP8 (--quantization fp8_per_block)"
"$octet" inspect --model "$model" --plan --quantization fp8_per_block 2>/dev/null | sed -n '2p;$p'
OCTET_LOG=info "$octet" generate --model "$model" --quantization fp8_per_block \
    --prompt-ids 1 --max-tokens 1 --temperature 0 2>&1 >/dev/null | grep -E "loaded in|Selected" || true
echo
echo "== 2. generation (fp8_per_block, temperature 0.7, seed 1; streamed as it decodes)"
for p in "The history of the" "In the morning the jury" "Scientists have found that"; do
    printf '%s' "$p"
    "$octet" generate --model "$model" --quantization fp8_per_block --prompt "$p" \
        --max-tokens 40 --temperature 0.7 --top-p 0.95 --seed 1 2>/dev/null
done
echo
if [ "$EVAL_TOKENS" -gt 0 ]; then what="first $EVAL_TOKENS tokens of $model/eval.txt"; else what="$model/eval.txt"; fi
echo "== 3. accuracy and speed per scheme (held-out text: $what; PyTorch's figures: $model/README.md)"
"$octet" quantize --model "$model" --scheme FP8_DYNAMIC --format compressed-tensors \
    --out "$work/fp8_dynamic" >/dev/null 2>&1
printf '%-28s %9s %9s %9s %8s %11s %12s %10s\n' scheme ppl "Δppl" KLD top-1 "decode t/s" "prefill t/s" "MB"
bf16_ppl=""
for s in bf16 fp8_per_tensor fp8_per_block mxfp8 fp8_dynamic_export; do
    cmp=()
    case $s in
        bf16) args=(--model "$model") ;;
        # a pre-quantized checkpoint: compared with its BF16 original
        fp8_dynamic_export) args=(--model "$work/fp8_dynamic") cmp=(--baseline-model "$model") ;;
        *) args=(--model "$model" --quantization "$s") ;;
    esac
    ev=$("$octet" eval "${args[@]}" "${cmp[@]}" --text "$model/eval.txt" --max-tokens "$EVAL_TOKENS" --json 2>/dev/null)
    gen=$("$octet" generate "${args[@]}" --prompt "The history of the" --max-tokens 64 \
        --ignore-eos --temperature 0 --json 2>/dev/null)
    ppl=$(field ppl "$ev")
    [ "$s" = bf16 ] && bf16_ppl=$ppl
    kld=$(field kld "$ev")
    top1=$(field top1_agree "$ev")
    awk -v s="$s" -v p="$ppl" -v b="$bf16_ppl" -v k="$kld" -v t="$top1" \
        -v d="$(field decode_tok_s "$gen")" -v f="$(field prefill_tok_s "$ev")" \
        -v w="$(field weight_bytes "$ev")" 'BEGIN {
        dp = (s == "bf16") ? "-" : sprintf("%+.3f%%", 100 * (p / b - 1));
        ks = (k == "-") ? "-" : sprintf("%.5f", k);
        ts = (t == "-") ? "-" : sprintf("%.2f%%", 100 * t);
        printf "%-28s %9.4f %9s %9s %8s %11.0f %12.0f %10.2f\n", s, p, dp, ks, ts, d, f, w / 1e6 }'
done
echo
echo "(MB: linear-layer weights as loaded + BF16 embeddings/lm_head; KLD and top-1 agreement"
echo " compare each FP8 model's next-token distribution with BF16's at every position.)"
echo "== demo finished in $(( $(date +%s) - start )) s"
