/* test_backend_moe.c — the CUDA MoE block (kernels/cuda/backend_cuda_moe.c:
 * routing, the expert sort, the grouped GEMMs, SiLU-mul, the combine) against
 * the CPU backend's moe op on the same weights and the same bf16-rounded
 * input, through the two backends' op tables.  Each case builds E experts
 * twice (CPU kernels; the registry's CUDA kernels) from one set of f32
 * weights quantized on the host:
 *   - BF16 experts, FP8 per-channel weights with per-token activations, FP8
 *     per-tensor weights with one per-tensor activation scale (vLLM's fused
 *     MoE), FP8 128x128 blocks with 1x128 groups, fused and unfused gate/up;
 *   - Qwen3-MoE-like (H 2048, I 768, top-8 of 32), Mixtral-like (H 4096,
 *     top-2 of 8) and a many-expert shape (128 experts, top-8), with
 *     renormalised and plain softmax weights;
 *   - batches of 1 to 300 tokens (every tile size of the grouped GEMM: 8
 *     and 16 rows in the streaming kernel, 32 and 64 in the tiled one), and
 *     BF16 experts of an intermediate size that is not a multiple of 128 (a
 *     tiled block's last weight rows past the end).
 * Tolerances: the device rounds the gate/up output and the expert outputs
 * to bf16 (as vLLM's fused MoE does), the CPU keeps f32.  BF16 experts: max
 * |gpu - cpu| <= 2% of max |cpu|, relative RMS <= 0.75% (measured 0.4%).
 * FP8 experts: the SiLU output is quantized to E4M3 (3 mantissa bits, steps
 * of 6-12%) from values that differ by that bf16 rounding (~0.1%), so ~2% of
 * its codes land one step apart: ~1.3% RMS on the expert outputs (measured
 * 1.3-2.2%), hence max <= 8%, RMS <= 3%.
 * A second call on the same batch must give bit-identical output (the
 * expert sort's atomics do not reach the results), and so must the block
 * without its decode-step fusions (oct_cuda_moe_fuse = 0: the gate/up input
 * quantized by its own kernel, not the routing one; SiLU-mul one block per
 * row; the per-tensor down input by the separate quantizer; the down GEMM
 * launched in the ordinary way, oct_cuda_moe_pdl = 0, where the other runs
 * launch it with programmatic serialization), also on a
 * shape whose few rows SiLU-mul splits over blocks.  Batches of up to 16
 * tokens run the BF16 router on its own kernel; they run again with it on
 * the linear layer's GEMM (oct_cuda_moe_router_kernel = 0), held to the same
 * tolerances (f32 sums in another order).  Without a GPU it prints
 * "skipped: no GPU".  OCTET_TEST_QUICK=1 (under compute-sanitizer): the
 * many-expert shape alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda_moe.h"
#include "kernels/cuda/cuda_api.h"
#include "octet.h"
#include "testlib.h"

#define MAX_TOL_BF16 0.02
#define RMS_TOL_BF16 0.0075
#define MAX_TOL_FP8 0.08
#define RMS_TOL_FP8 0.03

typedef enum { W_BF16, W_ROW, W_TENSOR, W_BLOCK } wkind;

typedef struct shape {
    int64_t H, I, E, k;
    bool norm;
} shape;

static uint64_t rng = 0x243F6A8885A308D3ull;

static float rnd(void) /* roughly N(0, 1) */
{
    float s = 0.0f;
    for (int i = 0; i < 4; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        s += (float)(rng >> 40) * 0x1p-24f;
    }
    return (s - 2.0f) * 1.7320508f;
}

/* One [n, k] layer for the backend ("cpu" / "cuda") from f32 weights w. */
static oct_linear *make_layer(const char *name, const float *w, int64_t n, int64_t k, wkind kind,
                              const char *backend)
{
    oct_linear_desc d = {.name = name, .n = n, .k = k};
    size_t nk = (size_t)(n * k);
    void *wt = NULL;
    float *sc = NULL;
    if (kind == W_BF16) {
        d.weight_type = OCT_WEIGHT_BF16;
        uint16_t *b = malloc(nk * 2);
        for (size_t i = 0; i < nk; i++)
            b[i] = oct_f32_to_bf16(w[i]);
        wt = b;
    } else {
        d.weight_type = OCT_WEIGHT_FP8;
        uint8_t *q = malloc(nk);
        sc = malloc((size_t)(n * (k / 128 + 1)) * sizeof(float));
        if (kind == W_ROW) {
            d.weight_scale = OCT_SCALE_ROW;
            d.act = OCT_ACT_DYNAMIC_TOKEN;
            oct_quant_rows(OCT_FP8_E4M3FN, w, n, k, 0.0f, q, sc);
        } else if (kind == W_TENSOR) {
            d.weight_scale = OCT_SCALE_TENSOR;
            d.act = OCT_ACT_DYNAMIC_TENSOR;
            oct_quant_tensor(OCT_FP8_E4M3FN, w, nk, q, sc);
        } else {
            d.weight_scale = OCT_SCALE_BLOCK128;
            d.act = OCT_ACT_GROUP128;
            oct_quant_blocks(OCT_FP8_E4M3FN, w, n, k, 128, 128, q, sc);
        }
        wt = q;
    }
    const oct_linear_kernel *kern = NULL;
    oct_linear *l = NULL;
    oct_error e;
    oct_status st = oct_linear_select(&d, backend, &kern, &e);
    if (st == OCT_OK)
        st = oct_linear_create(&d, kern, wt, sc, NULL, &l, &e);
    CHECKF(st == OCT_OK, "%s on %s: %s", name, backend, e.message);
    free(wt);
    free(sc);
    return l;
}

typedef struct block_set {
    oct_linear *router;
    oct_moe_expert *experts;
} block_set;

/* The experts (and a BF16 router) of shape s for one backend. */
static block_set make_block(const shape *s, wkind kind, bool unfused, float *const *wgu,
                            float *const *wdn, const float *wr, const char *backend)
{
    block_set b = {make_layer("router", wr, s->E, s->H, W_BF16, backend),
                   calloc((size_t)s->E, sizeof(oct_moe_expert))};
    const int64_t I = s->I, H = s->H;
    for (int64_t e = 0; e < s->E; e++) {
        oct_moe_expert *x = &b.experts[e];
        if (unfused) {
            x->gate_up[0] = make_layer("gate", wgu[e], I, H, kind, backend);
            x->gate_up[1] = make_layer("up", wgu[e] + I * H, I, H, kind, backend);
            x->n_gate_up = 2;
            x->gate_up_n[0] = x->gate_up_n[1] = I;
        } else {
            x->gate_up[0] = make_layer("gate_up", wgu[e], 2 * I, H, kind, backend);
            x->n_gate_up = 1;
            x->gate_up_n[0] = 2 * I;
        }
        x->down = make_layer("down", wdn[e], H, I, kind, backend);
        x->gate_up_tensor_act = x->down_tensor_act = kind == W_TENSOR;
    }
    return b;
}

static void free_block(block_set *b, int64_t E)
{
    for (int64_t e = 0; e < E; e++) {
        for (int p = 0; p < b->experts[e].n_gate_up; p++)
            oct_linear_free(b->experts[e].gate_up[p]);
        oct_linear_free(b->experts[e].down);
    }
    free(b->experts);
    oct_linear_free(b->router);
}

/* Workspace sizes for the MoE block of s alone, n tokens. */
static oct_fwd_dims moe_dims(const shape *s, int64_t n)
{
    return (oct_fwd_dims){.max_tokens = n,
                          .max_ctx = 16,
                          .hidden = s->H,
                          .intermediate = 1,
                          .n_heads = 1,
                          .n_kv_heads = 1,
                          .head_dim = 64,
                          .vocab = 16,
                          .n_experts = s->E,
                          .top_k = s->k,
                          .moe_intermediate = s->I};
}

/* The CUDA block on h (bf16, host) -> y (host f32), through a fresh workspace. */
static void run_cuda(oct_backend *be, const shape *s, const block_set *bs, int64_t n,
                     const uint16_t *h, float *y, bool again)
{
    const oct_backend_ops *op = be->ops;
    const oct_fwd_dims d = moe_dims(s, n);
    oct_backend_ws *ws = NULL;
    oct_error e;
    REQUIRE(op->ws_create(be, &d, &ws, &e) == OCT_OK);
    const size_t hb = (size_t)(n * s->H) * 2;
    void *dh = NULL, *dy = NULL;
    REQUIRE(op->alloc(be, hb, &dh, &e) == OCT_OK && op->alloc(be, hb, &dy, &e) == OCT_OK);
    REQUIRE(op->upload(be, dh, h, hb, &e) == OCT_OK);
    const oct_moe_block b = {bs->router, bs->experts, s->E, s->k, s->H, s->I, s->norm};
    oct_status st = op->moe(be, ws, &b, n, dh, dy, &e);
    CHECKF(st == OCT_OK, "cuda moe: %s", e.message);
    uint16_t *yb = malloc(hb), *y2 = malloc(hb);
    REQUIRE(op->download(be, yb, dy, hb, &e) == OCT_OK);
    if (again && st == OCT_OK) { /* same batch again: bit-identical */
        CHECK_OK(op->moe(be, ws, &b, n, dh, dy, &e));
        REQUIRE(op->download(be, y2, dy, hb, &e) == OCT_OK);
        CHECKF(memcmp(yb, y2, hb) == 0, "second call differs (n %lld)", (long long)n);
    }
    if (st == OCT_OK) { /* without the decode-step fusions: the same bytes */
        const int pdl = oct_cuda_moe_pdl;
        oct_cuda_moe_fuse = oct_cuda_moe_pdl = 0;
        CHECK_OK(op->moe(be, ws, &b, n, dh, dy, &e));
        oct_cuda_moe_fuse = 1;
        oct_cuda_moe_pdl = pdl;
        REQUIRE(op->download(be, y2, dy, hb, &e) == OCT_OK);
        CHECKF(memcmp(yb, y2, hb) == 0, "unfused block differs (n %lld)", (long long)n);
    }
    for (int64_t i = 0; i < n * s->H; i++)
        y[i] = oct_bf16_to_f32(yb[i]);
    free(yb);
    free(y2);
    op->free(be, dh);
    op->free(be, dy);
    op->ws_free(be, ws);
}

static void run_cpu(const shape *s, const block_set *bs, int64_t n, const float *h, float *y)
{
    oct_backend *be = oct_backend_cpu();
    const oct_fwd_dims d = moe_dims(s, n);
    oct_backend_ws *ws = NULL;
    oct_error e;
    REQUIRE(be->ops->ws_create(be, &d, &ws, &e) == OCT_OK);
    const oct_moe_block b = {bs->router, bs->experts, s->E, s->k, s->H, s->I, s->norm};
    CHECKF(be->ops->moe(be, ws, &b, n, h, y, &e) == OCT_OK, "cpu moe: %s", e.message);
    be->ops->ws_free(be, ws);
}

static void compare(const char *what, const float *cpu, const float *gpu, int64_t len, bool fp8)
{
    const double max_tol = fp8 ? MAX_TOL_FP8 : MAX_TOL_BF16;
    const double rms_tol = fp8 ? RMS_TOL_FP8 : RMS_TOL_BF16;
    double mx = 0, dmax = 0, se = 0, sr = 0;
    for (int64_t i = 0; i < len; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        mx = fmax(mx, fabs((double)cpu[i]));
        dmax = fmax(dmax, d);
        se += d * d;
        sr += (double)cpu[i] * (double)cpu[i];
    }
    const double rel = sr > 0 ? sqrt(se / sr) : 0.0;
    CHECKF(dmax <= max_tol * mx && rel <= rms_tol && isfinite(rel),
           "%s: max |gpu - cpu| %.4g (%.2f%% of max |cpu| %.4g, limit %.0f%%), rel RMS %.3f%% "
           "(limit %.1f%%)",
           what, dmax, 100 * dmax / mx, mx, 100 * max_tol, 100 * rel, 100 * rms_tol);
    printf("  %-44s max %.2f%% rms %.3f%%\n", what, 100 * dmax / mx, 100 * rel);
}

static void check_case(oct_backend *be, const shape *s, wkind kind, bool unfused, const int64_t *ns,
                       int n_ns)
{
    const int64_t H = s->H, I = s->I, E = s->E;
    float **wgu = malloc((size_t)E * sizeof *wgu), **wdn = malloc((size_t)E * sizeof *wdn);
    const float sg = 1.0f / sqrtf((float)H), sd = 1.0f / sqrtf((float)I);
    for (int64_t e = 0; e < E; e++) {
        wgu[e] = malloc((size_t)(2 * I * H) * sizeof(float));
        wdn[e] = malloc((size_t)(H * I) * sizeof(float));
        for (int64_t i = 0; i < 2 * I * H; i++)
            wgu[e][i] = rnd() * sg;
        for (int64_t i = 0; i < H * I; i++)
            wdn[e][i] = rnd() * sd;
    }
    float *wr = malloc((size_t)(E * H) * sizeof(float));
    for (int64_t i = 0; i < E * H; i++)
        wr[i] = rnd() * sg;
    block_set cpu = make_block(s, kind, unfused, wgu, wdn, wr, "cpu");
    block_set gpu = make_block(s, kind, unfused, wgu, wdn, wr, "cuda");
    static const char *k_names[] = {"bf16", "fp8 per-channel", "fp8 per-tensor", "fp8 block"};
    for (int c = 0; c < n_ns && testlib_cur_failed == 0; c++) {
        const int64_t n = ns[c];
        float *h = malloc((size_t)(n * H) * sizeof(float));
        uint16_t *hb = malloc((size_t)(n * H) * 2);
        for (int64_t i = 0; i < n * H; i++) {
            hb[i] = oct_f32_to_bf16(rnd());
            h[i] = oct_bf16_to_f32(hb[i]);
        }
        float *yc = malloc((size_t)(n * H) * sizeof(float)), *yg = malloc((size_t)(n * H) * 4);
        run_cpu(s, &cpu, n, h, yc);
        run_cuda(be, s, &gpu, n, hb, yg, c == n_ns - 1);
        char what[128];
        snprintf(what, sizeof what, "E%lld top-%lld H%lld I%lld %s%s n=%lld", (long long)E,
                 (long long)s->k, (long long)H, (long long)I, k_names[kind],
                 unfused ? " (gate, up)" : "", (long long)n);
        compare(what, yc, yg, n * H, kind != W_BF16);
        if (n <= OCT_CUDA_MOE_ROUTER_MAX_TOKENS) { /* the router's own kernel, and without */
            oct_cuda_moe_router_kernel = 0;
            run_cuda(be, s, &gpu, n, hb, yg, false);
            oct_cuda_moe_router_kernel = 1;
            snprintf(what + strlen(what), sizeof what - strlen(what), ", router GEMM");
            compare(what, yc, yg, n * H, kind != W_BF16);
        }
        free(h);
        free(hb);
        free(yc);
        free(yg);
    }
    free_block(&cpu, E);
    free_block(&gpu, E);
    for (int64_t e = 0; e < E; e++) {
        free(wgu[e]);
        free(wdn[e]);
    }
    free(wgu);
    free(wdn);
    free(wr);
}

static oct_backend *g_be;

static void test_qwen3_like(void)
{
    const shape s = {2048, 768, 32, 8, false};
    const int64_t ns[] = {1, 5, 64, 100, 300};
    for (int k = W_BF16; k <= W_BLOCK; k++)
        check_case(g_be, &s, (wkind)k, false, ns, 5);
    oct_cuda_moe_wgmma = 0; /* the FP8 tiles' mma.sync kernel, as off sm_90 */
    check_case(g_be, &s, W_ROW, false, ns + 3, 2);
    check_case(g_be, &s, W_BLOCK, false, ns + 3, 2);
    oct_cuda_moe_wgmma = 1;
}

static void test_mixtral_like(void)
{
    const shape s = {4096, 1024, 8, 2, true};
    const int64_t ns[] = {1, 64, 300};
    check_case(g_be, &s, W_ROW, false, ns, 3);
    check_case(g_be, &s, W_BLOCK, true, ns, 3);
    check_case(g_be, &s, W_TENSOR, true, ns, 3);
}

/* A decode step's few rows of a wide intermediate: SiLU-mul splits each row
 * over blocks (I / 8 >= 256 chunks), the per-tensor down input meets across
 * all of them; R = n k of 2, 10 (fused) and 18 (past the split limit). */
static void test_split_rows(void)
{
    const shape s = {1024, 4096, 4, 2, false};
    const int64_t ns[] = {1, 5, 9};
    for (int k = W_BF16; k <= W_BLOCK; k++)
        check_case(g_be, &s, (wkind)k, false, ns, 3);
}

static void test_many_experts(void)
{
    const shape s = {256, 128, 128, 8, true};
    const int64_t ns[] = {1, 16, 64, 300, 600};
    check_case(g_be, &s, W_ROW, false, ns, 5);
    check_case(g_be, &s, W_BLOCK, false, ns, 5);
    check_case(g_be, &s, W_BF16, true, ns, 5);
}

/* The per-tensor quantizer the MoE inputs take (one block up to 2^16 values,
 * three passes above): the CPU's oct_quant_tensor bytes and scale, NaN too. */
static void test_quant_tensor(void)
{
    const int64_t sizes[] = {1000, 65536, 70001};
    for (int c = 0; c < 3; c++)
        for (int nan = 0; nan < 2; nan++) {
            const int64_t n = sizes[c];
            uint16_t *xb = malloc((size_t)n * 2);
            float *xf = malloc((size_t)n * 4);
            uint8_t *qc = malloc((size_t)n), *qg = malloc((size_t)n);
            for (int64_t i = 0; i < n; i++) {
                xb[i] = oct_f32_to_bf16(rnd() * 3.0f);
                xf[i] = oct_bf16_to_f32(xb[i]);
            }
            if (nan) {
                xb[n / 3] = 0xFFC0u; /* a negative NaN */
                xf[n / 3] = oct_bf16_to_f32(0xFFC0u);
            }
            float sc = 0, sg = 0;
            void *dx = NULL, *dq = NULL, *ds = NULL;
            REQUIRE(oct_cuda_malloc(&dx, (size_t)n * 2) == OCT_OK &&
                    oct_cuda_malloc(&dq, (size_t)n) == OCT_OK && oct_cuda_malloc(&ds, 4) == OCT_OK);
            REQUIRE(oct_cuda_memcpy_h2d(dx, xb, (size_t)n * 2) == OCT_OK);
            oct_quant_tensor(OCT_FP8_E4M3FN, xf, (size_t)n, qc, &sc);
            CHECK_OK(oct_cuda_quant_tensor_bf16(dx, n, dq, ds, NULL));
            REQUIRE(oct_cuda_memcpy_d2h(qg, dq, (size_t)n) == OCT_OK &&
                    oct_cuda_memcpy_d2h(&sg, ds, 4) == OCT_OK);
            int64_t bad = 0; /* a NaN: a NaN scale and only NaN codes, as the CPU's */
            for (int64_t i = 0; i < n; i++)
                bad += nan ? (qg[i] & 0x7Fu) != 0x7Fu : qg[i] != qc[i];
            CHECKF(nan ? isnan(sc) && isnan(sg) && bad == 0 : sc == sg && bad == 0,
                   "n %lld%s: scale cpu %g gpu %g, %lld codes wrong", (long long)n,
                   nan ? " (NaN)" : "", (double)sc, (double)sg, (long long)bad);
            oct_cuda_free(dx), oct_cuda_free(dq), oct_cuda_free(ds);
            free(xb), free(xf), free(qc), free(qg);
        }
}

static void test_bad_args(void)
{
    void *d = NULL;
    REQUIRE(oct_cuda_malloc(&d, 1 << 16) == OCT_OK);
    CHECK(oct_cuda_moe_route(d, true, 4, 2000, 2, false, d, d, d, NULL) == OCT_ERR_UNSUPPORTED);
    CHECK(oct_cuda_moe_route(d, true, 4, 8, 9, false, d, d, d, NULL) == OCT_ERR_UNSUPPORTED);
    CHECK(oct_cuda_moe_align(d, -1, 2, 8, 8, d, d, d, d, d, NULL) == OCT_ERR_INVALID_ARG);
    oct_cuda_moe_gemm_args g = {.tiles = d,
                                .n_tiles = d,
                                .max_tiles = 1,
                                .tile_rows = 8,
                                .n = 16,
                                .k = 100,
                                .kind = OCT_SCALE_ROW,
                                .a = d,
                                .a_rows_max = 1,
                                .sa = d,
                                .w = d,
                                .sw = d,
                                .y = d,
                                .y_rs = 16};
    CHECK(oct_cuda_moe_gemm(&g, NULL) == OCT_ERR_UNSUPPORTED); /* k % 128 */
    g.k = 128;
    g.tile_rows = 12;
    CHECK(oct_cuda_moe_gemm(&g, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_moe_combine(d, d, d, 1, 2, 12, d, NULL) == OCT_ERR_INVALID_ARG); /* H % 8 */
    CHECK(oct_cuda_ops_last_error()[0] != '\0');
    char byte;
    CHECK(oct_cuda_memcpy_d2h(&byte, d, 1) == OCT_OK); /* the device is still healthy */
    oct_cuda_free(d);
}

int main(void)
{
    if (!oct_cuda_available()) {
        printf("skipped: no GPU\n");
        return testlib_finish();
    }
    oct_error e;
    if (oct_backend_cuda_create(0, true, &g_be, &e) != OCT_OK) {
        printf("FAIL: CUDA backend: %s\n", e.message);
        return 1;
    }
    oct_cuda_moe_pdl = oct_cuda_moe_router_kernel = 1;
    RUN(test_bad_args);
    RUN(test_quant_tensor);
    RUN(test_many_experts);
    RUN(test_split_rows);
    if (!getenv("OCTET_TEST_QUICK")) { /* (quick: under compute-sanitizer) */
        RUN(test_mixtral_like);
        RUN(test_qwen3_like);
    }
    oct_backend_free(g_be);
    return testlib_finish();
}
