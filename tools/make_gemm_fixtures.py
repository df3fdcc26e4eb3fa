#!/usr/bin/env python3
"""Golden outputs of torch._scaled_mm (cuBLASLt FP8 GEMM on an H100/H200) for
tests/test_gemm_torch.c.

Usage (on the GPU machine):
    python3 tools/make_gemm_fixtures.py OUTDIR
writes OUTDIR/gemm_torch.bin.gz; copy it to tests/fixtures/.

Format of gemm_torch.bin (little-endian):
    8 bytes  magic b"OCTGEMM1"
    u32      number of cases
    per case:
      u32 M, N, K, scale_mode (0 = per-tensor x per-tensor, 1 = row-wise: A per
          token [M], B per output channel [N]), has_bias (0/1)
      u8   A[M*K]   E4M3FN codes, row-major
      u8   B[N*K]   E4M3FN codes, row-major ([N,K]: passed to torch as B.t())
      f32  sa[1 or M], sb[1 or N]
      u16  bias[N]  bf16 (only when has_bias)
      u16  Y[M*N]   bf16 output of torch._scaled_mm(out_dtype=torch.bfloat16)
"""
import gzip
import os
import struct
import sys

import torch


def rand_codes(gen, rows, cols, dev):
    c = torch.randint(0, 256, (rows, cols), generator=gen, dtype=torch.int32)
    c = torch.where((c & 0x7F) == 0x7F, torch.zeros_like(c), c)  # no NaN codes
    return c.to(torch.uint8).to(dev)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    dev = "cuda"
    gen = torch.Generator().manual_seed(1234)
    # (M, N, K, mode, bias): K and N multiples of 16 as _scaled_mm requires.
    cases = [
        (1, 32, 128, 0, 0),
        (17, 48, 256, 0, 1),
        (64, 128, 512, 0, 0),
        (3, 64, 4096, 0, 0),
        (1, 64, 256, 1, 0),
        (33, 80, 512, 1, 1),
        (129, 32, 1024, 1, 0),
    ]
    blob = bytearray(b"OCTGEMM1")
    blob += struct.pack("<I", len(cases))
    for (M, N, K, mode, has_bias) in cases:
        a = rand_codes(gen, M, K, dev)
        b = rand_codes(gen, N, K, dev)
        a8 = a.view(torch.float8_e4m3fn)
        b8 = b.view(torch.float8_e4m3fn)
        if mode == 0:
            sa = (torch.rand(1, generator=gen) * 0.01 + 0.001).float()
            sb = (torch.rand(1, generator=gen) * 0.01 + 0.001).float()
            sa_t, sb_t = sa.to(dev), sb.to(dev)
        else:
            sa = (torch.rand(M, generator=gen) * 0.01 + 0.001).float()
            sb = (torch.rand(N, generator=gen) * 0.01 + 0.001).float()
            sa_t = sa.to(dev).reshape(M, 1).contiguous()
            sb_t = sb.to(dev).reshape(1, N).contiguous()
        bias = None
        if has_bias:
            bias = (torch.randn(N, generator=gen) * 0.5).to(torch.bfloat16)
        y = torch._scaled_mm(a8, b8.t(), scale_a=sa_t, scale_b=sb_t,
                             bias=bias.to(dev) if bias is not None else None,
                             out_dtype=torch.bfloat16)
        if isinstance(y, tuple):
            y = y[0]
        y = y.cpu().contiguous()
        blob += struct.pack("<5I", M, N, K, mode, has_bias)
        blob += a.cpu().numpy().tobytes()
        blob += b.cpu().numpy().tobytes()
        blob += sa.numpy().astype("<f4").tobytes()
        blob += sb.numpy().astype("<f4").tobytes()
        if has_bias:
            blob += bias.view(torch.int16).numpy().astype("<i2").tobytes()
        blob += y.view(torch.int16).numpy().astype("<i2").tobytes()
    path = os.path.join(out_dir, "gemm_torch.bin.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(bytes(blob), compresslevel=9, mtime=0))
    print(f"wrote {path} ({len(cases)} cases, {len(blob)} bytes raw)")


if __name__ == "__main__":
    main()
