#!/bin/bash
# Runs every test executable given on the command line from the repository
# root, shows its output, and sums the "N passed, N failed" line each prints.
# An executable that dies or omits the line counts as one failure.
# The suite checks the CPU kernels: in a CUDA build on a machine with a GPU,
# "auto" would send FP8 layers to the GPU (bench/cuda/ checks those), so the
# default here is the best CPU kernel and the CPU device (OCTET_DEVICE); a
# test that wants the GPU names it.
export OCTET_LINEAR_BACKEND=${OCTET_LINEAR_BACKEND:-cpu}
export OCTET_DEVICE=${OCTET_DEVICE:-cpu}
total_pass=0
total_fail=0
for t in "$@"; do
    echo "== $t"
    out=$("$t" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -v '^ok ' | tail -n 40
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "!! $t exited with status $rc and printed no summary line"
        total_fail=$((total_fail + 1))
        continue
    fi
    p=${line%% passed*}
    f=${line#*, }; f=${f%% failed}
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "!! $t exited with status $rc"
        total_fail=$((total_fail + 1))
    fi
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
