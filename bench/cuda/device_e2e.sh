#!/usr/bin/env bash
# device_e2e.sh — one call on the GPU machine for the whole model on the device:
# the cross-backend op test and compute-sanitizer memcheck on it, the whole-model
# test against the CPU backend, the server's tests on the GPU, the end-to-end
# benchmark, the serving benchmark (bench_serve.py), and per-kernel
# profiles of a decode step and a prefill.  Everything comes from build/devpack.tar.xz, made
# on the development machine by
#
#   make CUDA=1 BUILD=build/cuda all build/cuda/tests/test_backend_ops \
#        build/cuda/tests/test_model_device
#   tools/pack_device.sh tests/test_backend_ops tests/test_model_device
#
# Logs and JSON go to $OUT (default build/cuda_bench/e2e).  Knobs:
#   DEVPACK    the pack to run (default build/devpack.tar.xz)
#   E2E_ARGS   arguments of bench_e2e.py (default: --quick --no-torch)
#   STEPS      which parts run (default: "ops memcheck model bench profile")
#   PROFILES   the profiled passes, kind:prompt (default "decode:512 decode:8192
#              prefill:512"): Nsight Compute kernel times, summed per kernel by
#              bench/cuda/ncu_summary.py
#   PROFILE_Q  the --quantization of the profiled runs (default fp8)
#   NCU_CACHE  ncu --cache-control: "all" (default: caches flushed before each
#              kernel) or "none" (what a kernel finds in L2, prefetches included)
#   SERVE_ARGS arguments of bench_serve.py for the "serve" step (default: all of it);
#              it takes the real Llama 3 tokenizer from build/llama3_tokenizer.tar.xz
#              (tools/pack_device.sh --tokenizer makes it)
#   T_OPS, T_MEMCHECK, T_MODEL, T_MOE_OPS, T_MOE_MODEL, T_SERVER, T_BENCH, T_SERVE,
#   T_PROFILE  time limits in seconds
# Step "batch": `octet bench batch` on the Llama-3-8B shape (/tmp/llama8b, written by
# bench_e2e.py's make_model when missing): decode steps of BATCHES (default
# 1,16,64,256) sequences in lockstep at prompt 512, for each scheme of BATCH_Q
# (default "bf16 fp8"), KV cache dtype of BATCH_KV (default auto) and environment of
# BATCH_VARIANTS (default "-": none; e.g. "OCTET_CUDA_ATTN_STAGED=0 OCTET_CUDA_ATTN_STAGED=1"),
# a JSON line per batch size in batch_<scheme>_<kv>_<variant>.jsonl.
# Step "batchprofile": Nsight Compute kernel times of one eager decode step of
# each batch size of PROFILE_BATCHES (default "64 256"), scheme PROFILE_Q.
# Step "moebench": bench/cuda/bench_moe.py for each model of MOE_BENCH (default
# "qwen3 mixtral"), MOE_ARGS its extra arguments, T_MOE_BENCH the limit of each.
# Step "moeprofile": Nsight Compute kernel times of the Qwen3-shaped model with
# 4 of its layers (the same layer shapes; a load under ncu is slow per
# kernel): decode step and 512-token prefill, BF16 and fp8.
# Step "ab": bench/cuda/ab_knob.py on the Llama-3-8B shape for each case of AB_CASES
# (default "fp8:512:auto bf16:512:auto"; scheme:prompt:kv), the environment knob AB_KNOB
# (required, e.g. OCTET_CUDA_OPS_PDL), each pair of AB_PAIRS ("off:on", default "0:1"),
# AB_ROUNDS rounds (default 2); the lines go to ab_<knob>.txt.
# Step "moe": test_backend_moe (and memcheck on it), then the MoE models of
# tools/make_moe_device_models.py through test_model_device (OCTET_MOE_MODELS).
set -uo pipefail
OUT=${OUT:-build/cuda_bench/e2e}
STEPS=${STEPS:-ops memcheck model bench profile}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }

X=/tmp/octet_devpack
rm -rf "$X" && mkdir -p "$X" && tar xf "${DEVPACK:-build/devpack.tar.xz}" -C "$X" || exit 1
D=$X/devpack
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv \
    >"$OUT/gpu.txt" 2>&1

if want ops; then
    stamp "test_backend_ops"
    timeout ${T_OPS:-150} "$D/run" tests/test_backend_ops >"$OUT/ops.log" 2>&1
    echo "test_backend_ops rc=$?" | tee -a "$OUT/ops.log"
    grep -E "^FAIL|passed|not ok" "$OUT/ops.log" | head -30
fi
if want memcheck; then
    stamp "compute-sanitizer memcheck on test_backend_ops (quick)"
    OCTET_TEST_QUICK=1 timeout ${T_MEMCHECK:-300} compute-sanitizer --tool memcheck "$D/run" \
        tests/test_backend_ops >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?" | tee -a "$OUT/memcheck.log"
    grep -E "ERROR SUMMARY|passed" "$OUT/memcheck.log" | tail -3
fi
if want model; then
    stamp "test_model_device"
    [ -f /tmp/moe_models/granitemoe/config.json ] ||
        python3 tools/make_moe_device_models.py /tmp/moe_models >"$OUT/moe_models.log" 2>&1
    BUILD=$D OCTET_DEVICE= OCTET_MOE_MODELS=/tmp/moe_models timeout ${T_MODEL:-200} "$D/run" tests/test_model_device >"$OUT/model_device.log" 2>&1
    echo "test_model_device rc=$?" | tee -a "$OUT/model_device.log"
    grep -E "logits|greedy|eval ppl|FAIL|passed" "$OUT/model_device.log" | grep -v -E "moe|mixtral" |
        head -40
fi
if want moe; then
    # the MoE block against the CPU backend, op by op and in whole models
    # (Mixtral, Qwen3-MoE, GraniteMoe in device shapes, written here by transformers)
    stamp "test_backend_moe"
    timeout ${T_MOE_OPS:-200} "$D/run" tests/test_backend_moe >"$OUT/moe_ops.log" 2>&1
    echo "test_backend_moe rc=$?" | tee -a "$OUT/moe_ops.log"
    grep -E "^FAIL|passed|not ok" "$OUT/moe_ops.log" | head -30
    stamp "compute-sanitizer memcheck on test_backend_moe"
    OCTET_TEST_QUICK=1 timeout ${T_MEMCHECK:-300} compute-sanitizer --tool memcheck "$D/run" \
        tests/test_backend_moe >"$OUT/moe_memcheck.log" 2>&1
    echo "memcheck rc=$?" | tee -a "$OUT/moe_memcheck.log"
    grep -E "ERROR SUMMARY|passed" "$OUT/moe_memcheck.log" | tail -3
    stamp "MoE models (tools/make_moe_device_models.py) on the device and the CPU"
    [ -f /tmp/moe_models/granitemoe/config.json ] ||
        python3 tools/make_moe_device_models.py /tmp/moe_models >"$OUT/moe_models.log" 2>&1 ||
        tail -5 "$OUT/moe_models.log"
    if ! want model; then # (the model step ran them with the rest)
        BUILD=$D OCTET_DEVICE= OCTET_MOE_MODELS=/tmp/moe_models OCTET_TEST_MOE_ONLY=1 \
            timeout ${T_MOE_MODEL:-300} "$D/run" tests/test_model_device >"$OUT/moe_model.log" 2>&1
        echo "test_model_device (MoE) rc=$?" | tee -a "$OUT/moe_model.log"
        grep -E "FAIL|passed" "$OUT/moe_model.log" | head -30
    fi
fi
if want moebench; then
    for mm in ${MOE_BENCH:-qwen3 mixtral}; do
        stamp "bench_moe.py --model $mm ${MOE_ARGS:=}"
        # shellcheck disable=SC2086
        PYTHONUNBUFFERED=1 timeout ${T_MOE_BENCH:-560} python3 bench/cuda/bench_moe.py \
            --octet "$D/octet" --model "$mm" --out "$OUT" $MOE_ARGS >"$OUT/moe_bench_$mm.log" 2>&1
        echo "bench_moe $mm rc=$?" | tee -a "$OUT/moe_bench_$mm.log"
        tail -25 "$OUT/moe_bench_$mm.log"
    done
fi
if want moeprofile; then
    # per-kernel times of one decode step (batch 1) and one 512-token prefill of
    # the Qwen3-30B-A3B-shaped model (4 layers), BF16 and fp8, eager (ncu)
    python3 bench/cuda/bench_moe.py --octet "$D/octet" --model qwen3 --out "$OUT" --write-only \
        --layers 4 --dir /tmp/moe_qwen3_l4 >"$OUT/moe_profile_write.log" 2>&1
    for q in bf16 fp8; do
        for pp in decode:3 prefill:1; do
            kind=${pp%%:*} pass=${pp##*:}
            stamp "ncu: qwen3 $q $kind (pass $pass)"
            OCTET_CUDA_PROFILE_PASS=$pass timeout ${T_PROFILE:-300} ncu --profile-from-start off \
                --clock-control none --metrics gpu__time_duration.sum --csv "$D/octet" bench batch \
                --model /tmp/moe_qwen3_l4 --device cuda --enforce-eager --batch 1 --prompt 512 \
                --decode 4 $([ $q = bf16 ] || echo --quantization $q) \
                >"$OUT/ncu_moe_${q}_$kind.csv" 2>"$OUT/ncu_moe_${q}_$kind.err"
            python3 bench/cuda/ncu_summary.py "$OUT/ncu_moe_${q}_$kind.csv" |
                tee "$OUT/ncu_moe_summary_${q}_$kind.txt" | head -22
        done
    done
fi
if want server; then
    # the server's black-box tests (openai npm client included where node exists) against
    # the GPU backend: models/demo on the device
    stamp "test_server on the GPU"
    BUILD=$D OCTET_DEVICE=cuda timeout ${T_SERVER:-240} "$D/run" tests/test_server >"$OUT/server.log" 2>&1
    echo "test_server rc=$?" | tee -a "$OUT/server.log"
    grep -E "^FAIL|not ok|passed|differs from" "$OUT/server.log" | head -20
fi
if want bench; then
    stamp "bench_e2e.py ${E2E_ARGS:=--quick --no-torch}"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout ${T_BENCH:-560} python3 ${BENCH_PY:-bench/cuda/bench_e2e.py} --octet "$D/octet" \
        --out "$OUT" $E2E_ARGS >"$OUT/bench.log" 2>&1
    echo "bench rc=$?" | tee -a "$OUT/bench.log"
    tail -30 "$OUT/bench.log"
fi
if want serve; then
    stamp "bench_serve.py ${SERVE_ARGS:=}"
    mkdir -p /tmp/llama3_tok && tar xJf build/llama3_tokenizer.tar.xz -C /tmp/llama3_tok
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout ${T_SERVE:-560} python3 bench/cuda/bench_serve.py --octet "$D/octet" \
        --tokenizer /tmp/llama3_tok --out "$OUT" $SERVE_ARGS >"$OUT/serve.log" 2>&1
    echo "serve rc=$?" | tee -a "$OUT/serve.log"
    tail -45 "$OUT/serve.log"
fi
if want batch || want batchprofile || want ab; then
    [ -f /tmp/llama8b/config.json ] || PYTHONPATH=bench/cuda python3 -c \
        "import bench_e2e; bench_e2e.make_model('/tmp/llama8b')" >"$OUT/make_model.log" 2>&1
fi
if want batch; then
    # each variant of BATCH_VARIANTS ("-": none) is an environment assignment, e.g.
    # OCTET_CUDA_ATTN_STAGED=0; BATCH_KV: --kv-cache-dtype values ("auto fp8")
    for q in ${BATCH_Q:-bf16 fp8}; do
        for kv in ${BATCH_KV:-auto}; do
            for v in ${BATCH_VARIANTS:--}; do
                f="$OUT/batch_${q}_${kv}_${v//[^A-Za-z0-9_]/_}.jsonl"
                stamp "octet bench batch $q kv $kv $v --batch ${BATCHES:=1,16,64,256}"
                env $([ "$v" = - ] || echo "$v") timeout ${T_BATCH:-300} "$D/octet" bench batch \
                    --model /tmp/llama8b --device cuda $([ "$q" = bf16 ] || echo --quantization "$q") \
                    --kv-cache-dtype "$kv" --batch "$BATCHES" --prompt 512 --decode 32 --json \
                    >"$f" 2>"${f%.jsonl}.err"
                echo "bench batch rc=$?"
                cat "$f"
            done
        done
    done
fi
if want ab; then
    knob=${AB_KNOB:?step ab: set AB_KNOB}
    for c in ${AB_CASES:-fp8:512:auto bf16:512:auto}; do
        IFS=: read -r q P kv <<<"$c"
        for pair in ${AB_PAIRS:-0:1}; do
            stamp "ab_knob $knob ${pair%%:*} / ${pair##*:}: $q, prompt $P, KV $kv"
            timeout ${T_AB:-300} python3 bench/cuda/ab_knob.py --octet "$D/octet" --model /tmp/llama8b \
                --knob "$knob" --off "${pair%%:*}" --on "${pair##*:}" --prompt "$P" \
                --rounds "${AB_ROUNDS:-2}" $([ "$q" = bf16 ] || echo --quantization "$q") \
                $([ "$kv" = auto ] || echo --kv "$kv") 2>&1 | tee -a "$OUT/ab_$knob.txt"
        done
    done
fi
if want batchprofile; then
    # passes: the untimed prompt (0), B prompts (1..B), 4 untimed steps, then timed ones
    for B in ${PROFILE_BATCHES:-64 256}; do
        stamp "ncu: decode step of $B rows, ${PROFILE_Q:-fp8}, eager"
        OCTET_CUDA_PROFILE_PASS=$((B + 6)) timeout ${T_PROFILE:-300} ncu --profile-from-start off \
            --clock-control none --cache-control ${NCU_CACHE:-all} --metrics gpu__time_duration.sum \
            --csv "$D/octet" bench batch --model /tmp/llama8b --device cuda --enforce-eager \
            --quantization "${PROFILE_Q:-fp8}" --batch "$B" --prompt 512 --decode 8 \
            >"$OUT/ncu_batch_$B.csv" 2>"$OUT/ncu_batch_$B.err"
        echo "ncu rc=$?"
        python3 bench/cuda/ncu_summary.py "$OUT/ncu_batch_$B.csv" |
            tee "$OUT/ncu_summary_batch_$B.txt" | head -25
    done
fi
if want profile && [ -f /tmp/llama8b/config.json ]; then
    # with --warmup the passes are: the prompt (0), 4 decode steps (1-4; kernel
    # choices are made in the first ones), the timed prompt (5), its decode steps
    for prof in ${PROFILES:-decode:512 decode:8192 prefill:512}; do
        kind=${prof%%:*} P=${prof##*:}
        pass=$([ "$kind" = prefill ] && echo 5 || echo 7)
        stamp "ncu: $kind pass $pass, prompt $P, ${PROFILE_Q:=fp8}, eager"
        ids=$(python3 -c "print(','.join(str(1000 + 7 * i) for i in range($P)))")
        OCTET_CUDA_PROFILE_PASS=$pass timeout ${T_PROFILE:-300} ncu --profile-from-start off \
            --clock-control none --cache-control ${NCU_CACHE:-all} --metrics gpu__time_duration.sum --csv "$D/octet" generate \
            --model /tmp/llama8b --device cuda --enforce-eager --warmup \
            --quantization "$PROFILE_Q" --prompt-ids "$ids" --max-tokens 4 --temperature 0 \
            --ignore-eos >"$OUT/ncu_${kind}_$P.csv" 2>"$OUT/ncu_${kind}_$P.err"
        echo "ncu rc=$?"
        python3 bench/cuda/ncu_summary.py "$OUT/ncu_${kind}_$P.csv" |
            tee "$OUT/ncu_summary_${kind}_$P.txt" | head -25
    done
fi
stamp done
