#!/usr/bin/env bash
# check_convert_outputs.sh — `octet convert` outputs loaded by transformers.
#
# Here (after make and make test, which unpacks the fixtures):
#   tools/check_convert_outputs.sh prepare     -> build/convert_check/out/<src>__<target>
# On a machine with a CUDA GPU, torch, transformers (and compressed-tensors for
# the compressed-tensors outputs), from the repository root, the folder above
# carried along:
#   tools/check_convert_outputs.sh check OUTDIR
# runs tools/check_transformers_load.py on each output (transformers' own FP8
# layers against the dequantized weights) and writes OUTDIR/<name>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/convert_check
pairs="quark_fp8:compressed-tensors fp8_block:compressed-tensors ct_fp8_static:compressed-tensors
       ct_fp8_block:fp8 ct_fp8_static:fp8 quark_fp8:fp8"

prepare() {
    rm -rf "$root" && mkdir -p "$root/src" "$root/out"
    for pair in $pairs; do
        s=${pair%%:*} t=${pair##*:}
        d=$root/src/$s
        if [ ! -d "$d" ]; then
            mkdir -p "$d"
            cp tests/fixtures/ckpt_"$s"/* "$d"/
            for f in build/fixtures/ckpt_"${s}"__*; do cp "$f" "$d/${f#build/fixtures/ckpt_${s}__}"; done
        fi
        ./build/octet convert --model "$d" --format "$t" --out "$root/out/${s}__$t"
    done
}

check() {
    out=$1
    mkdir -p "$out"
    python3 -c "import compressed_tensors as c; print('compressed-tensors', c.__version__)" ||
        echo "compressed-tensors is not installed: its outputs will not load"
    rc=0
    for d in "$root"/out/*; do
        n=$(basename "$d")
        if python3 tools/check_transformers_load.py "$d" --out "$out/$n.json" >"$out/$n.log" 2>&1; then
            echo "$n: pass"
        else
            echo "$n: FAIL ($(tail -1 "$out/$n.log" | cut -c1-200))"
            rc=1
        fi
    done
    return $rc
}

case "${1:-}" in
prepare) prepare ;;
check) check "${2:?OUTDIR}" ;;
*) echo "usage: $0 prepare | check OUTDIR" >&2; exit 2 ;;
esac
