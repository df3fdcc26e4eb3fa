#!/usr/bin/env python3
"""Golden data for the FP8 formats and quantization schemes, made with PyTorch.

Run where PyTorch >= 2.4 is installed (the H200 machine has 2.11):

    python3 tools/make_fp8_fixtures.py OUTDIR
    gzip -9 -n OUTDIR/*.safetensors  ->  tests/fixtures/

Writes two safetensors files:

fp8_casts.safetensors — what `tensor.to(torch.float8_*)` gives:
  * "bf16.<fmt>.<mode>"  U8[65536]   every bf16 bit pattern, in order
  * "f16.<fmt>.<mode>"   U8[65536]   every fp16 bit pattern, in order
  * "f32.edges"          I32[n_e]    f32 bit patterns of the edge set (below)
  * "f32.<fmt>.<mode>"   U8[n_e+n_r] codes for the edge set, then the random set
  The random set is not stored: it is 5 pools of POOL values from splitmix64
  (seed 0x0C7E7+pool), bits = sign<<31 | (lo+(r>>32)%span)<<23 | (r & 0x7FFFFF),
  with (lo, span) per pool in POOLS; tests/test_fp8.c regenerates it and checks
  the FNV-1a-64 digest of all input bits against metadata "f32_digest".
  <mode> is "nonsat" (the plain cast) or "sat" (clamp to +-finfo.max first,
  NaN kept: torch.clamp propagates NaN).  e8m0fnu has no "sat" variant of its
  own: octet defines SAT == NONSAT for it, and the fixture stores the plain cast
  under both names.

quant_ref.safetensors — the scale rules of docs/NUMERICS.md §Quantization schemes
written with torch ops (see each case below); inputs and outputs are stored.
"""
import math
import os
import struct
import sys

import torch
from safetensors.torch import save_file

FORMATS = [
    ("e4m3fn", torch.float8_e4m3fn),
    ("e5m2", torch.float8_e5m2),
    ("e4m3fnuz", torch.float8_e4m3fnuz),
    ("e5m2fnuz", torch.float8_e5m2fnuz),
    ("e8m0fnu", torch.float8_e8m0fnu),
]
POOL = 200_000
# biased f32 exponent ranges: each pool covers one format's range generously
POOLS = [(115, 23), (108, 37), (114, 23), (107, 38), (0, 256)]
M64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def random_bits():
    out = []
    for p, (lo, span) in enumerate(POOLS):
        s = 0x0C7E7 + p
        for _ in range(POOL):
            s, r = splitmix64(s)
            sign = r >> 63
            e = lo + ((r >> 32) % span)
            out.append((sign << 31) | (e << 23) | (r & 0x7FFFFF))
    return out


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(u):
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def edge_bits():
    """Every code's value, the midpoints between neighbouring codes, each +-1
    and +-2 ulp, values just past max, specials, and e8m0 rounding edges."""
    vals = set()
    for name, dt in FORMATS:
        codes = torch.arange(256, dtype=torch.uint8).view(dt).float()
        v = sorted({float(c) for c in codes.tolist() if math.isfinite(c) and c >= 0})
        if name != "e8m0fnu":
            v.append(float(torch.finfo(dt).max) * 2)  # "next" value past max
        pts = list(v)
        for a, b in zip(v, v[1:]):
            pts.append((a + b) / 2)
        for p in pts:
            u = f32_bits(p)
            for d in range(-2, 3):
                if 0 <= u + d < 0x7F800000:
                    vals.add(u + d)
    for k in range(-149, 128):  # e8m0: powers of two, 1.5x, 1.75x, +-ulp, subnormals
        for m in (1.0, 1.25, 1.5, 1.75, 1.9999999):
            x = math.ldexp(m, k)
            if x < 3.4e38:
                u = f32_bits(x)
                for d in (-1, 0, 1):
                    if 0 < u + d < 0x7F800000:
                        vals.add(u + d)
    for u in range(0, 64):  # tiny f32 subnormals
        vals.add(u)
    for u in (0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7F7FFFFF, 0x00400000,
              0x00400001, 0x00600000, 0x00200000):
        vals.add(u)
    out = []
    for u in sorted(vals):
        out.append(u)
        out.append(u | 0x80000000)
    return out


def fnv1a64(bits):
    h = 0xCBF29CE484222325
    for u in bits:
        for k in range(4):
            h ^= (u >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & M64
    return h


def cast(x, dt, mode):
    if mode == "sat" and dt != torch.float8_e8m0fnu:
        m = torch.finfo(dt).max
        x = x.clamp(-m, m)
    return x.to(dt).view(torch.uint8)


def make_casts(dev):
    t = {}
    pats = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    bf16 = pats.view(torch.bfloat16).to(dev)
    # fp16 -> fp32 widening on the CPU: CUDA's conversion canonicalises NaN to
    # +NaN (0x7FFFFFFF) and would drop the sign of negative NaN inputs, which
    # c10's exact widening (and octet) keep.
    f16 = pats.view(torch.float16)
    edges = edge_bits()
    rnd = random_bits()
    allbits = edges + rnd
    xs = torch.tensor([b - (1 << 32) if b >= (1 << 31) else b for b in allbits],
                      dtype=torch.int32).view(torch.float32).to(dev)
    for name, dt in FORMATS:
        for mode in ("nonsat", "sat"):
            # bf16/fp16 are widened to fp32 first (exact), as torch does
            t[f"bf16.{name}.{mode}"] = cast(bf16.float(), dt, mode).cpu()
            t[f"f16.{name}.{mode}"] = cast(f16.float().to(dev), dt, mode).cpu()
            t[f"f32.{name}.{mode}"] = cast(xs, dt, mode).cpu()
            # the direct casts must agree with the widened ones
            assert torch.equal(cast(bf16, dt, mode).cpu(), t[f"bf16.{name}.{mode}"])
    t["f32.edges"] = torch.tensor([b - (1 << 32) if b >= (1 << 31) else b for b in edges],
                                  dtype=torch.int32)
    meta = {"n_edges": str(len(edges)), "n_random": str(len(rnd)), "pool": str(POOL),
            "f32_digest": "%016x" % fnv1a64(allbits), "torch": torch.__version__}
    return t, meta


# ---------------------------------------------------------------- quant cases
Q = 448.0


def e4(x):
    return x.to(torch.float8_e4m3fn).view(torch.uint8)


def div(a, b):
    """IEEE f32 division a / b.  On CUDA `tensor / python_float` is computed as
    tensor * (1/b), one ulp off true division; vLLM's CUDA kernels (and octet)
    divide, so divide by a tensor."""
    return a / torch.full_like(a, b)


def quant_cases(dev):
    g = torch.Generator(device="cpu").manual_seed(1234)
    t = {}

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dev)

    # per-tensor dynamic: scale = max(amax/Q, 1/(Q*512)); q = cast(clamp(x * (1/scale)))
    for name, x in (("tensor.rand", rnd(64, 300)), ("tensor.zero", torch.zeros(8, 64, device=dev)),
                    ("tensor.outlier", torch.cat([rnd(15, 256), rnd(1, 256) * 0 + 3000.0]))):
        x[..., 0] = x[..., 0]  # keep shape
        s = torch.clamp(div(x.abs().amax(), Q), min=1.0 / (Q * 512))
        q = e4(torch.clamp(x * torch.reciprocal(s), -Q, Q))
        t[name + ".x"], t[name + ".scale"], t[name + ".q"] = x, s.reshape(1), q
        deq = q.view(torch.float8_e4m3fn).float() * s
        err = x - deq
        t[name + ".sqnr_db"] = (10 * torch.log10((x * x).sum() / (err * err).sum())).reshape(1) \
            if (err * err).sum() > 0 else torch.tensor([float("inf")], device=dev)
        t[name + ".max_abs"] = err.abs().max().reshape(1)
        t[name + ".rel_fro"] = (err.norm() / x.norm()).reshape(1) if x.norm() > 0 \
            else torch.zeros(1, device=dev)
    # per-tensor with NaN / Inf inputs (torch propagates: NaN scale / NaN codes)
    x = rnd(4, 64)
    x[1, 3] = float("nan")
    s = torch.clamp(div(x.abs().amax(), Q), min=1.0 / (Q * 512))
    t["tensor.nan.x"], t["tensor.nan.scale"] = x, s.reshape(1)
    t["tensor.nan.q"] = e4(torch.clamp(x * torch.reciprocal(s), -Q, Q))

    # per-token dynamic: scale = max(min(amax_row, ub)/Q, 1/(Q*512)); q = cast(clamp(x / scale))
    for name, x, ub in (("token.rand", rnd(33, 300), None),
                        ("token.ub", torch.cat([rnd(7, 200), rnd(1, 200) * 50]), 20.0),
                        ("token.zero", torch.zeros(3, 128, device=dev), None)):
        am = x.abs().amax(dim=1, keepdim=True)
        if ub is not None:
            am = torch.clamp(am, max=ub)
            t[name + ".ub"] = torch.tensor([ub], dtype=torch.float32)
        s = torch.clamp(div(am, Q), min=1.0 / (Q * 512))
        t[name + ".x"], t[name + ".scale"] = x, s.reshape(-1)
        t[name + ".q"] = e4(torch.clamp(x / s, -Q, Q))
    # per-token into e4m3fnuz with the AMD quantization max 224
    x = rnd(9, 160)
    s = torch.clamp(div(x.abs().amax(dim=1, keepdim=True), 224.0), min=1.0 / (224.0 * 512))
    t["token_fnuz.x"], t["token_fnuz.scale"] = x, s.reshape(-1)
    t["token_fnuz.q"] = torch.clamp(x / s, -224.0, 224.0).to(torch.float8_e4m3fnuz).view(torch.uint8)

    # per-channel weights [N,K]: scale_n = max(amax_n/Q, 1/(Q*512)); q = cast(clamp(w / scale))
    w = rnd(96, 200, scale=0.02)
    w[5] = 0
    s = torch.clamp(div(w.abs().amax(dim=1, keepdim=True), Q), min=1.0 / (Q * 512))
    t["channel.x"], t["channel.scale"], t["channel.q"] = w, s.reshape(-1), e4(torch.clamp(w / s, -Q, Q))

    # 1x128 activation groups (partial last group when K % 128 != 0):
    # scale = max(amax_g/Q, 1/(Q*512)); q = cast(clamp(x / scale))
    for name, K in (("group.k300", 300), ("group.k256", 256)):
        x = rnd(17, K)
        x[3, :] = 0
        G = (K + 127) // 128
        xp = torch.nn.functional.pad(x, (0, G * 128 - K)).reshape(17, G, 128)
        s = torch.clamp(div(xp.abs().amax(dim=2, keepdim=True), Q), min=1.0 / (Q * 512))
        q = e4(torch.clamp(xp / s, -Q, Q)).reshape(17, G * 128)[:, :K]
        t[name + ".x"], t[name + ".scale"], t[name + ".q"] = x, s.reshape(17, G), q.contiguous()

    # 128x128 weight blocks (vLLM per_block_cast_to_fp8): ceil-counted, zero padded;
    # scale = max(amax_b, 1e-4)/Q; q = cast(w * (1/scale)) (no clamp needed: |.| <= Q)
    for name, N, K in (("block.300x200", 300, 200), ("block.256x384", 256, 384)):
        w = rnd(N, K, scale=0.05).to(torch.bfloat16).float()
        w[:128, :128] = 0  # an all-zero block -> scale 1e-4/Q
        BN, BK = (N + 127) // 128, (K + 127) // 128
        wp = torch.nn.functional.pad(w, (0, BK * 128 - K, 0, BN * 128 - N)).reshape(BN, 128, BK, 128)
        am = wp.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
        s = div(am, Q)
        q = e4(wp * (1.0 / s)).reshape(BN * 128, BK * 128)[:N, :K]
        t[name + ".w"], t[name + ".scale"], t[name + ".q"] = w, s.reshape(BN, BK), q.contiguous()

    # MXFP8, 1x32 blocks, E8M0 scales; element op x / 2^(e-127), clamp +-448, cast.
    x = rnd(16, 256)
    x[0, :32] = x[0, :32] / x[0, :32].abs().max() * 3.0
    x[1, :32] = x[1, :32] / x[1, :32].abs().max() * 448.0
    x[2, :32] = x[2, :32] / x[2, :32].abs().max() * 1e-40
    x[3, :32] = 0
    x[4, :32] = x[4, :32] / x[4, :32].abs().max() * 1.8  # mantissa >= 1.75: recipes differ
    xb = x.reshape(16, 8, 32)
    am = xb.abs().amax(dim=2, keepdim=True)
    bits = am.view(torch.int32)
    ex = ((bits >> 23) & 0xFF) - 127  # floor(log2(amax)) for normal amax
    # amax 0 or f32-subnormal: use floor(log2) of the value itself (frexp), 0 -> code 0
    fr_e = torch.frexp(am)[1] - 1
    ex = torch.where(((bits >> 23) & 0xFF) == 0, fr_e, ex)
    # OCP: e = floor(log2 amax) - 8 + 127, clamped to [0, 254]; amax == 0 -> 0
    e_ocp = torch.where(am == 0, torch.zeros_like(ex), torch.clamp(ex - 8 + 127, 0, 254))
    # compressed-tensors: round amax up to the next power of two when its mantissa >= 1.75
    up = (((bits >> 23) & 0xFF) > 0) & ((bits & 0x7FFFFF) >= 0x600000)
    e_ct = torch.where(am == 0, torch.zeros_like(ex), torch.clamp(ex + up.int() - 8 + 127, 0, 254))
    for name, e in (("mx.ocp", e_ocp), ("mx.ct", e_ct)):
        sc = torch.exp2((e - 127).double()).float()
        q = e4(torch.clamp(xb / sc, -Q, Q)).reshape(16, 256)
        t[name + ".x"], t[name + ".scale"], t[name + ".q"] = x, e.reshape(16, 8).to(torch.uint8), q

    # static scale: q = cast(clamp(x * (1/s)))
    x = rnd(10, 200)
    s = torch.tensor(0.005, device=dev)
    t["static.x"], t["static.scale"] = x, s.reshape(1)
    t["static.q"] = e4(torch.clamp(x * (1.0 / s), -Q, Q))

    # fused per-tensor shards -> max scale.  vLLM: w' = quant(fp16(fp16(w_fp8) * s_i), s_max)
    # with quant = cast(clamp(x * (1/s_max))); octet's exact mode does the dequant in fp32.
    shards = [rnd(64, 128, scale=0.05), rnd(32, 128, scale=0.2), rnd(32, 128, scale=0.01)]
    scales = [torch.clamp(div(w.abs().amax(), Q), min=1e-12) for w in shards]
    qs = [e4(torch.clamp(w / s, -Q, Q)) for w, s in zip(shards, scales)]
    smax = torch.stack(scales).max()
    fp16_out, f32_out = [], []
    for q, s in zip(qs, scales):
        d16 = q.view(torch.float8_e4m3fn).to(torch.float16) * s.to(torch.float32)
        fp16_out.append(e4(torch.clamp(d16.to(torch.float16).float() * (1.0 / smax), -Q, Q)))
        d32 = q.view(torch.float8_e4m3fn).float() * s
        f32_out.append(e4(torch.clamp(d32 * (1.0 / smax), -Q, Q)))
    t["fused.q_in"] = torch.cat(qs)
    t["fused.scales_in"] = torch.stack(scales)
    t["fused.rows"] = torch.tensor([64, 32, 32], dtype=torch.int32)
    t["fused.scale_out"] = smax.reshape(1)
    t["fused.q_fp16"] = torch.cat(fp16_out)
    t["fused.q_f32"] = torch.cat(f32_out)

    # e4m3fn -> e4m3fnuz: bytes 0x80 -> 0x00 (reinterpret), scale x2; values unchanged
    b = torch.arange(256, dtype=torch.uint8)
    nb = torch.where(b == 0x80, torch.zeros_like(b), b)
    t["fnuz.in"], t["fnuz.out"] = b, nb
    ok = b.view(torch.float8_e4m3fn).float() * 0.5
    ok2 = nb.view(torch.float8_e4m3fnuz).float() * 1.0
    fin = torch.isfinite(ok) & (b != 0x80)
    assert torch.equal(ok[fin], ok2[fin])
    return {k: v.detach().contiguous().cpu() for k, v in t.items()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    casts, meta = make_casts(dev)
    meta["device"] = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    save_file(casts, os.path.join(out, "fp8_casts.safetensors"), metadata=meta)
    save_file(quant_cases(dev), os.path.join(out, "quant_ref.safetensors"),
              metadata={"torch": torch.__version__})
    print("wrote", out, meta)


if __name__ == "__main__":
    main()
