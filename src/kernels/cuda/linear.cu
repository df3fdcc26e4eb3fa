// linear.cu — the CUDA linear-layer entry points: a context (cuBLASLt handle,
// workspace, activation scratch), FP8 W8A8 with dynamic activation quantization
// (per-token or 1x128 groups) and pre-quantized FP8 GEMMs.  The kernel is
// whichever measured fastest on the first call of the shape among octet's Hopper
// GEMM (gemm_wgmma.cu, each tile shape), cuBLASLt (gemm_lt.cu) and, for small M,
// the streaming kernels (gemv_fp8*.cu); off sm_90 (or with the wgmma knob off)
// the streaming kernel by rule up to 16 tokens.
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "kernels/cuda/cuda_impl.h"

// The streaming path up to this M: on sm_90 one measured candidate (large_gemm:
// against the swapped wgmma shapes and cuBLASLt), elsewhere by rule; from 17
// tokens the streaming kernel is a candidate up to 64.
#define OCT_CUDA_GEMV_MAX_M_DEFAULT 16
// BF16 linears of up to this many rows on the streaming kernel (gemv_bf16.cu)
// rather than cuBLASLt: a decode step's weights start streaming while their
// producer runs (programmatic launch), and no split-K reduction kernel follows.
#define OCT_CUDA_GEMV_BF16_MAX_M_DEFAULT 16
#define OCT_CUDA_GEMV_MAX_M_BLOCK_DEFAULT 16
// The fused-quantization persistent kernel (gemv_fp8_fused.cu) up to this M and
// m * k: every block quantizes all of x itself (m*k divisions per block), which
// measured slower than the separate quantizer beyond ~8K elements, and only when
// blocks stream two or more tiles (gemv_fp8_fused.cu; H200, docs/BENCHMARKS.md:
// 4096->6144 M = 1-2 15.3-16.9 vs 18.0-18.4 us, 4096->28672 even, M >= 4 slower).
#define OCT_CUDA_GEMV_FUSED_MAX_M_DEFAULT 2
#define OCT_CUDA_GEMV_FUSED_MAX_MK_DEFAULT 8192
#define OCT_CUDA_LT_WS_BYTES ((size_t)32 << 20)

// The measured choice for one shape (large_gemm below).
struct oct_mm_choice {
    int dev;
    int64_t m, n, k; // m: the power-of-two bucket
    int ka, kw;
    int wg_ok, lt_ok, gemv_ok, stream_ok; // which candidates were allowed
    int cfg;    // >= 0: wgmma config; -1: cuBLASLt; -3: the streaming kernel; -4: the small-M
                // streaming path with its own quantization (stream_ok); -2: none runs
    int wg_cfg; // the fastest wgmma config (-1: none), for M where cuBLASLt has no kernel
    oct_mm_choice *next;
};

oct_status oct_cuda_grow(oct_cuda_ctx *c, void **buf, size_t *have, size_t need)
{
    if (need <= *have)
        return OCT_OK;
    const size_t want = need + need / 4; // some headroom so growing M one by one stays cheap
    void *p = NULL;
    if (cudaMalloc(&p, want) != cudaSuccess) {
        cudaGetLastError();
        return OCT_ERR_NOMEM;
    }
    oct_cuda_kept *k = *buf ? (oct_cuda_kept *)malloc(sizeof *k) : NULL;
    if (*buf && !k) {
        cudaFree(p);
        return OCT_ERR_NOMEM;
    }
    if (k) { // a graph captured earlier may replay into the old buffer
        k->p = *buf;
        k->next = c->kept;
        c->kept = k;
    }
    *buf = p;
    *have = want;
    return OCT_OK;
}

extern "C" oct_status oct_cuda_ctx_create(oct_cuda_ctx **out)
{
    if (!out)
        return OCT_ERR_INVALID_ARG;
    *out = NULL;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return OCT_ERR_UNSUPPORTED;
    oct_cuda_ctx *c = (oct_cuda_ctx *)calloc(1, sizeof *c);
    if (!c)
        return OCT_ERR_NOMEM;
    c->gemv_max_m = OCT_CUDA_GEMV_MAX_M_DEFAULT;
    c->lt_block_mn_major = 1; // measured: cuBLASLt 13.1 reads VEC128 scales as [k/128][m]
    c->gemv_max_m_block = OCT_CUDA_GEMV_MAX_M_BLOCK_DEFAULT;
    c->gemv_fused_max_m = OCT_CUDA_GEMV_FUSED_MAX_M_DEFAULT;
    c->gemv_fused_max_mk = OCT_CUDA_GEMV_FUSED_MAX_MK_DEFAULT;
    c->wgmma = 1;
    c->gemv_persist = 1;
    c->gemv_bf16_max_m = OCT_CUDA_GEMV_BF16_MAX_M_DEFAULT;
    const char *env = getenv("OCTET_CUDA_WGMMA");
    if (env && *env)
        c->wgmma = atoi(env) != 0;
    env = getenv("OCTET_CUDA_GEMV_MAX_M");
    if (env && *env)
        c->gemv_max_m = atoll(env);
    env = getenv("OCTET_CUDA_GEMV_BF16_MAX_M");
    if (env && *env)
        c->gemv_bf16_max_m = atoll(env);
    env = getenv("OCTET_CUDA_GEMV_FUSED_MAX_M");
    if (env && *env)
        c->gemv_fused_max_m = atoll(env);
    env = getenv("OCTET_CUDA_GEMV_FUSED_ANY_GRID");
    if (env && *env)
        c->gemv_fused_any_grid = atoi(env) != 0;
    // (process-wide, as the "gemv_tma" key; set before any path is chosen)
    env = getenv("OCTET_CUDA_GEMV");
    if (env && !strcmp(env, "tma"))
        oct_cuda_gemv_use_tma = 1;
    cublasLtHandle_t h = NULL;
    const float one = 1.0f;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return OCT_ERR_UNSUPPORTED;
    }
    c->lt = h;
    if (cudaMalloc((void **)&c->one, sizeof(float)) != cudaSuccess ||
        cudaMemcpy(c->one, &one, sizeof one, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMalloc(&c->lt_ws, OCT_CUDA_LT_WS_BYTES) != cudaSuccess) {
        oct_cuda_ctx_free(c);
        return OCT_ERR_NOMEM;
    }
    c->lt_ws_bytes = OCT_CUDA_LT_WS_BYTES;
    *out = c;
    return OCT_OK;
}

extern "C" void oct_cuda_ctx_free(oct_cuda_ctx *c)
{
    if (!c)
        return;
    oct_cuda_lt_free_plans(c);
    while (c->choices) {
        oct_mm_choice *h = c->choices;
        c->choices = h->next;
        free(h);
    }
    if (c->lt)
        cublasLtDestroy((cublasLtHandle_t)c->lt);
    cudaFree(c->lt_ws);
    cudaFree(c->q);
    cudaFree(c->s);
    cudaFree(c->one);
    cudaFree(c->d32);
    cudaFree(c->swpad);
    cudaFree(c->wg_ws);
    cudaFree(c->wg_cnt);
    while (c->kept) {
        oct_cuda_kept *k = c->kept;
        c->kept = k->next;
        cudaFree(k->p);
        free(k);
    }
    cudaFree(c->l2_flush);
    free(c);
}

extern "C" oct_status oct_cuda_ctx_reserve(oct_cuda_ctx *c, int64_t max_m, int64_t max_k)
{
    if (!c || max_m < 0 || max_k < 0)
        return OCT_ERR_INVALID_ARG;
    oct_status s = oct_cuda_grow(c, (void **)&c->q, &c->q_bytes, (size_t)(max_m * max_k));
    if (s == OCT_OK)
        s = oct_cuda_grow(c, (void **)&c->s, &c->s_bytes,
                          (size_t)(max_m * ((max_k + 127) / 128 + 1)) * sizeof(float));
    return s;
}

extern "C" oct_status oct_cuda_ctx_set(oct_cuda_ctx *c, const char *key, int64_t value)
{
    if (!c || !key)
        return OCT_ERR_INVALID_ARG;
    if (!strcmp(key, "gemv_max_m"))
        c->gemv_max_m = value;
    else if (!strcmp(key, "gemv_max_m_block"))
        c->gemv_max_m_block = value;
    else if (!strcmp(key, "gemv_fused_max_m"))
        c->gemv_fused_max_m = value;
    else if (!strcmp(key, "gemv_fused_max_mk"))
        c->gemv_fused_max_mk = value;
    else if (!strcmp(key, "gemv_fused_any_grid"))
        c->gemv_fused_any_grid = value != 0;
    else if (!strcmp(key, "gemv_tma"))
        oct_cuda_gemv_use_tma = value != 0;
    else if (!strcmp(key, "gemv_evict_first"))
        oct_cuda_gemv_evict_first = value != 0;
    else if (!strcmp(key, "gemv_max_ctas"))
        oct_cuda_gemv_max_ctas = value > 0 && value < INT32_MAX ? (int)value : 0;
    else if (!strcmp(key, "quant_bulk"))
        oct_cuda_quant_bulk = value == 2 ? 2 : value != 0;
    else if (!strcmp(key, "quant_pdl")) // (process-wide, like quant_bulk)
        oct_cuda_quant_pdl = value != 0;
    else if (!strcmp(key, "large_gemv"))
        c->large_gemv = value != 0;
    else if (!strcmp(key, "gemv_bf16_max_m"))
        c->gemv_bf16_max_m = value;
    else if (!strcmp(key, "gemv_persist"))
        c->gemv_persist = value != 0;
    else if (!strcmp(key, "wgmma"))
        c->wgmma = value != 0;
    else if (!strcmp(key, "wgmma_cfg")) {
        if (value < 0 || value > oct_cuda_wgmma_num_configs())
            return OCT_ERR_INVALID_ARG;
        c->wgmma_cfg = (int)value;
    } else if (!strcmp(key, "lt_block_mn_major"))
        c->lt_block_mn_major = (int)value;
    else
        return OCT_ERR_INVALID_ARG;
    return OCT_OK;
}

extern "C" const char *oct_cuda_ctx_last_kernel(const oct_cuda_ctx *c)
{
    return c ? c->last_kernel : "";
}

// ---- large M: octet's Hopper GEMM or cuBLASLt, measured per shape ----

// Times n candidates (run(i) enqueues candidate i): a warm-up of each (which
// also tunes cuBLASLt's plan), then 5 rounds that each time every candidate once,
// after an L2 flush; med[i] is candidate i's median in ms, 1e30 when it failed.
// Round-robin, so that a clock that drifts while the tuner runs (a GPU heating
// up under ~1 ms calls) biases no candidate: timed one after another, cuBLASLt
// (timed last) lost 4096->28672 M = 4096 to a tile shape it beats by 20%.  The
// flush because in a model the weights stream from DRAM (they are far larger
// than the L2), and a warm-L2 timing ranks the tile shapes differently (first
// H200 run: 64x128 tiles "won" at 4096->6144 M = 128 and took 25.2 us under
// do_bench's flush, against cuBLASLt's 22.4).
enum { kMaxCandidates = 40 }; // tile shapes + cuBLASLt + the streaming kernel

template <class F>
static void time_round_robin(oct_cuda_ctx *c, int n, F run, float *med, cudaStream_t st)
{
    enum { kReps = 5 };
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (!c->l2_flush) {
        int dev = 0, l2 = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) == cudaSuccess && l2 > 0)
            oct_cuda_grow(c, &c->l2_flush, &c->l2_flush_bytes, 2 * (size_t)l2);
    }
    bool ok[kMaxCandidates];
    float t[kMaxCandidates][kReps];
    const bool events = cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
    if (!events)
        cudaGetLastError(); // nothing is timed (every candidate counts as failed)
    for (int i = 0; i < n; i++) {
        ok[i] = events && run(i) == OCT_OK && cudaStreamSynchronize(st) == cudaSuccess;
        if (!ok[i])
            cudaGetLastError();
    }
    for (int r = 0; r < kReps; r++)
        for (int i = 0; i < n; i++) {
            t[i][r] = 1e30f;
            if (!ok[i])
                continue;
            if (c->l2_flush)
                cudaMemsetAsync(c->l2_flush, r, c->l2_flush_bytes, st);
            cudaEventRecord(e0, st);
            const oct_status s = run(i);
            cudaEventRecord(e1, st);
            if (s != OCT_OK || cudaEventSynchronize(e1) != cudaSuccess ||
                cudaEventElapsedTime(&t[i][r], e0, e1) != cudaSuccess) {
                cudaGetLastError();
                t[i][r] = 1e30f;
            }
        }
    for (int i = 0; i < n; i++) {
        for (int r = 1; r < kReps; r++) // insertion sort
            for (int j = r; j > 0 && t[i][j] < t[i][j - 1]; j--) {
                const float x = t[i][j];
                t[i][j] = t[i][j - 1];
                t[i][j - 1] = x;
            }
        med[i] = t[i][kReps / 2];
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
}

// oct_cuda_grow, the new buffer zeroed on st if zero.
static oct_status grow_kept(oct_cuda_ctx *c, void **buf, size_t *have, size_t need, bool zero,
                            cudaStream_t st)
{
    if (need <= *have)
        return OCT_OK;
    oct_status s = oct_cuda_grow(c, buf, have, need);
    if (s == OCT_OK && zero && cudaMemsetAsync(*buf, 0, *have, st) != cudaSuccess) {
        cudaGetLastError();
        return OCT_ERR_NOMEM;
    }
    return s;
}

// One gemm_wgmma.cu shape on the context's split-K workspace (grown, the counters
// zeroed, when a shape needs more; not while the stream is being captured into a
// graph).  A shape that cannot get its workspace answers OCT_ERR_UNSUPPORTED, and
// the caller falls back to another candidate.
static oct_status wgmma_gemm(oct_cuda_ctx *c, const oct_wgmma_args *g, int cfg, bool pdl,
                             cudaStream_t st)
{
    oct_wgmma_args a = *g;
    size_t need = 0, counters = 0;
    oct_cuda_wgmma_workspace(cfg, g->m, g->n, g->k, &need, &counters);
    const size_t cnt_bytes = counters * sizeof(int);
    if (need > c->wg_ws_bytes || cnt_bytes > c->wg_cnt_bytes) {
        cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone ||
            grow_kept(c, &c->wg_ws, &c->wg_ws_bytes, need, false, st) != OCT_OK ||
            grow_kept(c, (void **)&c->wg_cnt, &c->wg_cnt_bytes, cnt_bytes, true, st) != OCT_OK)
            return OCT_ERR_UNSUPPORTED;
    }
    a.ws = c->wg_ws;
    a.ws_bytes = c->wg_ws_bytes;
    a.cnt = c->wg_cnt;
    a.cnt_n = c->wg_cnt_bytes / sizeof(int);
    return oct_cuda_wgmma_gemm(&a, cfg, pdl, st);
}

static oct_status run_wgmma(oct_cuda_ctx *c, const oct_wgmma_args *g, int cfg, bool pdl,
                            cudaStream_t st)
{
    const oct_status s = wgmma_gemm(c, g, cfg, pdl, st);
    if (s == OCT_OK)
        snprintf(c->last_kernel, sizeof c->last_kernel, "%s", oct_cuda_wgmma_config_name(cfg));
    return s;
}

static oct_status run_gemv(oct_cuda_ctx *c, const oct_wgmma_args *g, bool pdl, cudaStream_t st)
{
    // Per-token codes made by a producer (RMSNorm, SiLU-mul): the persistent
    // kernel's even tile split where blocks stream two or more tiles (4096->6144:
    // 384 tiles on 264 resident blocks would run as 1.45 waves).
    if (g->ka == OCT_SCALE_ROW && g->kw == OCT_SCALE_ROW && g->m <= c->gemv_max_m &&
        c->gemv_persist && !oct_cuda_gemv_use_tma) {
        const oct_status p = oct_cuda_gemv_w8a8_persist_launch(
            g->m, g->n, g->k, g->a, g->sa, g->w, g->sw, g->y, c->gemv_fused_any_grid != 0, st);
        if (p != OCT_ERR_UNSUPPORTED) {
            if (p == OCT_OK)
                snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_row_persistent");
            return p;
        }
    }
    const oct_status s = oct_cuda_gemv_w8a8_launch_strided(
        g->m, g->n, g->k, g->a, g->sa, g->sa_rs, g->sa_ks, g->w, g->sw, g->ka, g->y, pdl, st);
    if (s == OCT_OK)
        snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_%s",
                 g->ka == OCT_SCALE_ROW ? "row" : "block");
    return s;
}

static oct_status run_lt(oct_cuda_ctx *c, const oct_wgmma_args *g, cudaStream_t st)
{
    return oct_cuda_lt_gemm(c, g->m, g->n, g->k, g->a, g->ka, g->sa, g->w, g->kw, g->sw, g->y, st);
}

// y = a w^T on the auto path (per-token and block scales at any M on sm_90, else
// from 17 tokens) and at any M on a forced LT / WGMMA path.  Candidates: every
// gemm_wgmma.cu tile shape that fits (unless path is LT or the "wgmma" knob is
// off), cuBLASLt (when lt_ok: block scales laid out as cuBLASLt reads them, and
// path is not WGMMA), up to 64 tokens on the auto path the streaming kernel
// after the quantizer (it wins some M = 32 shapes: 128x128 block scales on
// 4096->6144 and 14336->4096), and with stream_ok (dynamic per-token, m <=
// gemv_max_m) stream(): the whole streaming path with its own quantization, a
// and sa then being filled by quant() only for the other candidates.
//
// The first call of each (device, power-of-two bucket of m, n, k, scale kinds)
// times them all on the caller's buffers and keeps the fastest: slow (tens of
// launches), so a stream being captured into a CUDA graph gets a default instead
// (the streaming path up to gemv_max_m tokens, else cuBLASLt where allowed, else
// the first wgmma shape that fits, else the streaming kernel), not remembered.  The outputs must
// not alias the inputs (the quantization is re-run after candidates wrote y).  quant() re-enqueues
// the activation quantization that produced a / sa (a no-op for pre-quantized inputs): it is timed
// with each candidate, as it runs, so the wgmma kernel's programmatic dependent launch (pdl: it
// fetches weights while the quantizer runs) counts.  cuBLASLt keeps the shape unless a wgmma shape
// beats it by 3%: at the largest shapes the two measured within a few percent in the tuner and
// cuBLASLt ahead under sustained load (14336->4096 M = 8192: 905 vs 972 us).  A
// choice that cannot run a later call of its bucket (cuBLASLt's block kernels
// need M % 4 == 0; an unaligned operand) falls back to the other candidates.
template <class Q, class S>
static oct_status large_gemm(oct_cuda_ctx *c, const oct_wgmma_args *g, int path, bool pdl,
                             bool lt_ok, cudaStream_t st, Q quant, bool stream_ok, S stream)
{
    const bool block = g->ka == OCT_SCALE_BLOCK128;
    const int wg_ok = path == OCT_CUDA_PATH_WGMMA || (path != OCT_CUDA_PATH_LT && c->wgmma);
    lt_ok = lt_ok && path != OCT_CUDA_PATH_WGMMA;
    const int gemv_ok = !stream_ok && path == OCT_CUDA_PATH_AUTO && g->m <= 64 && g->k % 128 == 0 &&
                        g->ka == g->kw && (g->ka == OCT_SCALE_ROW || g->ka == OCT_SCALE_BLOCK128);
    // stream_ok: a and sa are not filled yet; every other candidate runs quant() first.
    auto prep = [&] { return stream_ok ? quant() : OCT_OK; };
    if (wg_ok && c->wgmma_cfg > 0) {
        const oct_status s = prep();
        return s != OCT_OK ? s : run_wgmma(c, g, c->wgmma_cfg - 1, pdl, st);
    }
    if (gemv_ok && c->large_gemv)
        return run_gemv(c, g, pdl, st);
    // One measurement per power-of-two bucket of M (M changes every step under
    // continuous batching; each new bucket is measured once, at the first M seen).
    int64_t mb = 1;
    while (mb < g->m)
        mb *= 2;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return OCT_ERR_INTERNAL;
    oct_mm_choice *ch = c->choices;
    while (ch &&
           !(ch->dev == dev && ch->m == mb && ch->n == g->n && ch->k == g->k && ch->ka == g->ka &&
             ch->kw == g->kw && ch->wg_ok == wg_ok && ch->lt_ok == (int)lt_ok &&
             ch->gemv_ok == gemv_ok && ch->stream_ok == (int)stream_ok))
        ch = ch->next;
    int cfg = ch ? ch->cfg : -2, wg_cfg = ch ? ch->wg_cfg : -1;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (!ch && cudaStreamIsCapturing(st, &cap) == cudaSuccess &&
        cap != cudaStreamCaptureStatusNone) {
        for (int i = 0; wg_ok && wg_cfg < 0 && i < oct_cuda_wgmma_num_configs(); i++)
            if (oct_cuda_wgmma_config_fits(i, block, g->m, g->n, g->k))
                wg_cfg = i;
        // (up to gemv_max_m tokens the streaming kernel, as the path was by rule;
        // cuBLASLt's first call of a shape tunes with synchronizing events)
        const int64_t small_m = block ? c->gemv_max_m_block : c->gemv_max_m;
        cfg = stream_ok                    ? -4
              : gemv_ok && g->m <= small_m ? -3
              : lt_ok                      ? -1
              : wg_cfg >= 0                ? wg_cfg
              : gemv_ok                    ? -3
                                           : -2;
    } else if (!ch) {
        // Time each allowed candidate with its quantizer in front (1e30: it
        // failed): the wgmma tile shapes that fit (ids >= 0), cuBLASLt (-1), the
        // streaming kernel (-3), the small-M streaming path (-4, its own
        // quantization).
        int ids[kMaxCandidates], n = 0;
        for (int i = 0; wg_ok && i < oct_cuda_wgmma_num_configs() && n < kMaxCandidates - 3; i++)
            if (oct_cuda_wgmma_config_fits(i, block, g->m, g->n, g->k))
                ids[n++] = i;
        if (lt_ok)
            ids[n++] = -1;
        if (gemv_ok)
            ids[n++] = -3;
        if (stream_ok)
            ids[n++] = -4;
        float med[kMaxCandidates];
        time_round_robin(
            c, n,
            [&](int i) {
                if (ids[i] == -4)
                    return stream();
                const oct_status s = quant();
                if (s != OCT_OK)
                    return s;
                return ids[i] >= 0    ? wgmma_gemm(c, g, ids[i], pdl, st)
                       : ids[i] == -1 ? run_lt(c, g, st)
                                      : run_gemv(c, g, pdl, st);
            },
            med, st);
        const float kFailed = 1e29f;
        float best = kFailed, t_lt = 1e30f, t_gemv = 1e30f, t_stream = 1e30f;
        for (int i = 0; i < n; i++) {
            if (ids[i] == -1)
                t_lt = med[i];
            else if (ids[i] == -3)
                t_gemv = med[i];
            else if (ids[i] == -4)
                t_stream = med[i];
            else if (med[i] < best) {
                best = med[i];
                cfg = wg_cfg = ids[i];
            }
        }
        if (t_lt < kFailed && t_lt < best * 1.03f) {
            best = t_lt;
            cfg = -1;
        }
        if (t_gemv < best)
            cfg = -3;
        if (t_stream < best)
            cfg = -4;
        // The flush buffer (2 x L2) is only for measuring: give it back.
        cudaFree(c->l2_flush);
        c->l2_flush = NULL;
        c->l2_flush_bytes = 0;
        if (cfg == -2) // nothing ran: nothing to remember (it may be transient)
            return stream_ok ? stream() : OCT_ERR_UNSUPPORTED;
        ch = (oct_mm_choice *)calloc(1, sizeof *ch);
        if (!ch)
            return OCT_ERR_NOMEM;
        *ch = oct_mm_choice{dev,   mb,      g->n,      g->k, g->ka,  g->kw,     wg_ok,
                            lt_ok, gemv_ok, stream_ok, cfg,  wg_cfg, c->choices};
        c->choices = ch;
    }
    // The choice, then the other allowed candidates if it cannot run this call.
    if (cfg == -4)
        return stream();
    oct_status s = prep();
    if (s != OCT_OK)
        return s;
    s = OCT_ERR_UNSUPPORTED;
    if (cfg >= 0)
        s = run_wgmma(c, g, cfg, pdl, st);
    else if (cfg == -3)
        s = run_gemv(c, g, pdl, st);
    else if (cfg == -1)
        s = run_lt(c, g, st);
    if (s == OCT_ERR_UNSUPPORTED && cfg != -1 && lt_ok)
        s = run_lt(c, g, st);
    if (s == OCT_ERR_UNSUPPORTED && wg_cfg >= 0 && wg_cfg != cfg)
        s = run_wgmma(c, g, wg_cfg, pdl, st);
    if (s == OCT_ERR_UNSUPPORTED && gemv_ok && cfg != -3)
        s = run_gemv(c, g, pdl, st);
    if (s == OCT_ERR_UNSUPPORTED && stream_ok)
        s = stream();
    return s;
}

static oct_status no_quant(void)
{
    return OCT_OK;
}

static oct_status no_stream(void)
{
    return OCT_ERR_UNSUPPORTED;
}

static bool use_gemv(const oct_cuda_ctx *c, int64_t m, int64_t k, int path, oct_scale_kind kind)
{
    if (path == OCT_CUDA_PATH_GEMV)
        return true;
    if (path == OCT_CUDA_PATH_LT || path == OCT_CUDA_PATH_WGMMA)
        return false;
    const int64_t max_m = kind == OCT_SCALE_BLOCK128 ? c->gemv_max_m_block : c->gemv_max_m;
    return k % 128 == 0 && m <= max_m;
}

// Up to gemv_max_m(_block) tokens the auto path measures the streaming path
// against octet's Hopper GEMM and cuBLASLt (large_gemm) on sm_90, unless the wgmma
// knob is off or the gemv_tma test knob on; else the streaming path runs by rule.
static bool small_m_measured(const oct_cuda_ctx *c, int path)
{
    return path == OCT_CUDA_PATH_AUTO && c->wgmma && !oct_cuda_gemv_use_tma &&
           oct_cuda_device_is_sm90();
}

// The per-token streaming path (m <= gemv_max_m): the fused-quantization kernel
// where it applies, else the quantizer then the persistent (or plain) streaming
// kernel.
static oct_status stream_rows(oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k, const void *x,
                              const uint8_t *w, const float *sw, float ub, uint16_t *yo,
                              void *stream)
{
    cudaStream_t st = oct_cuda_stream(stream);
    oct_status s;
    if (m <= c->gemv_fused_max_m && (m == 1 || m * k <= c->gemv_fused_max_mk) &&
        !oct_cuda_gemv_use_tma) {
        s = oct_cuda_gemv_w8a8_fused_launch(m, n, k, x, ub, w, sw, yo, c->gemv_fused_any_grid != 0,
                                            st);
        if (s != OCT_ERR_UNSUPPORTED) {
            snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_row_fusedquant");
            return s;
        }
    }
    s = oct_cuda_quant_rows_bf16(x, m, k, ub, c->q, c->s, stream);
    if (s != OCT_OK)
        return s;
    if (c->gemv_persist && !oct_cuda_gemv_use_tma) {
        s = oct_cuda_gemv_w8a8_persist_launch(m, n, k, c->q, c->s, w, sw, yo,
                                              c->gemv_fused_any_grid != 0, st);
        if (s != OCT_ERR_UNSUPPORTED) {
            snprintf(c->last_kernel, sizeof c->last_kernel, "quant_rows+gemv_w8a8_row_persistent");
            return s;
        }
    }
    snprintf(c->last_kernel, sizeof c->last_kernel, "quant_rows+gemv_w8a8_row");
    return oct_cuda_gemv_w8a8_launch(m, n, k, c->q, c->s, w, sw, OCT_SCALE_ROW, yo, true, st);
}

extern "C" oct_status oct_cuda_linear_fp8_dyn(oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k,
                                              const void *x, const uint8_t *w, oct_scale_kind kind,
                                              const float *sw, float ub, void *y, int path,
                                              void *stream)
{
    if (!c || m < 0 || n <= 0 || k <= 0 || !w || !sw || (m > 0 && (!x || !y)))
        return OCT_ERR_INVALID_ARG;
    if (kind != OCT_SCALE_ROW && kind != OCT_SCALE_BLOCK128)
        return OCT_ERR_UNSUPPORTED;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    const int64_t nkb = (k + 127) / 128;
    oct_status s = oct_cuda_ctx_reserve(c, m, k);
    if (s != OCT_OK)
        return s;
    uint16_t *yo = static_cast<uint16_t *>(y);
    const bool gemv = use_gemv(c, m, k, path, kind);
    if (kind == OCT_SCALE_ROW) {
        auto quant = [&] { return oct_cuda_quant_rows_bf16(x, m, k, ub, c->q, c->s, stream); };
        if (gemv) {
            auto streamf = [&] { return stream_rows(c, m, n, k, x, w, sw, ub, yo, stream); };
            // Auto: the streaming path against octet's Hopper GEMM (its swapped
            // shapes stream the weights through the copy engine) and cuBLASLt,
            // measured per shape like the larger M.
            if (!small_m_measured(c, path))
                return streamf();
            const oct_wgmma_args g = {m,    n,  k, c->q, w, OCT_SCALE_ROW, OCT_SCALE_ROW,
                                      c->s, sw, 0, 0,    yo};
            return large_gemm(c, &g, path, true, true, st, quant, true, streamf);
        }
        s = quant();
        if (s != OCT_OK)
            return s;
        const oct_wgmma_args g = {m,    n,  k, c->q, w, OCT_SCALE_ROW, OCT_SCALE_ROW,
                                  c->s, sw, 0, 0,    yo};
        return large_gemm(c, &g, path, true, true, st, quant, false, no_stream);
    }
    const bool block_gemv = gemv && !small_m_measured(c, path);
    const bool mn = !block_gemv && c->lt_block_mn_major;
    s = oct_cuda_quant_groups_strided(x, m, k, c->q, c->s, mn ? 1 : nkb, mn ? m : 1, st);
    if (s != OCT_OK)
        return s;
    if (block_gemv) {
        snprintf(c->last_kernel, sizeof c->last_kernel, "quant_groups+gemv_w8a8_block");
        return oct_cuda_gemv_w8a8_launch(m, n, k, c->q, c->s, w, sw, OCT_SCALE_BLOCK128, yo, true,
                                         st);
    }
    // Scales [k/128][m] when cuBLASLt may run (it reads them so), else [m][k/128].
    const oct_wgmma_args g = {
        m,          n, k, c->q, w, OCT_SCALE_BLOCK128, OCT_SCALE_BLOCK128, c->s, sw, mn ? 1 : nkb,
        mn ? m : 1, yo};
    s = large_gemm(
        c, &g, path, true, mn, st,
        [&] {
            return oct_cuda_quant_groups_strided(x, m, k, c->q, c->s, mn ? 1 : nkb, mn ? m : 1, st);
        },
        false, no_stream);
    if (s == OCT_ERR_UNSUPPORTED && path == OCT_CUDA_PATH_AUTO && k % 128 == 0) {
        // Nothing measured runs here (cuBLASLt has no block kernel for M % 4 != 0,
        // and there is no Hopper GEMM off sm_90): the streaming kernel, 64 tokens
        // per weight pass, on the scales as laid out.
        snprintf(c->last_kernel, sizeof c->last_kernel, "quant_groups+gemv_w8a8_block(fallback)");
        return oct_cuda_gemv_w8a8_launch_strided(m, n, k, c->q, c->s, mn ? 1 : nkb, mn ? m : 1, w,
                                                 sw, OCT_SCALE_BLOCK128, yo, true, st);
    }
    return s;
}

namespace
{
__global__ void broadcast_scale(const float *__restrict__ s, int64_t m, float *__restrict__ out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = *s;
}

__global__ void transpose_scales(const float *__restrict__ src, int64_t m, int64_t nkb,
                                 float *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m * nkb)
        dst[(i % nkb) * m + i / nkb] = src[i];
}
} // namespace

extern "C" oct_status oct_cuda_gemm_fp8(oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k,
                                        const uint8_t *a, oct_scale_kind ka, const float *sa,
                                        const uint8_t *w, oct_scale_kind kw, const float *sw,
                                        void *y, int path, void *stream)
{
    if (!c || m < 0 || n <= 0 || k <= 0 || !w || !sw || (m > 0 && (!a || !sa || !y)))
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    uint16_t *yo = static_cast<uint16_t *>(y);
    if (ka == OCT_SCALE_TENSOR && kw == OCT_SCALE_ROW) {
        // One activation scale (dynamic per-tensor, on the device) with per-channel
        // weights: expanded to one per row, so every per-token path runs it (the
        // epilogue's sa[r] * (sw[c] * acc) is then exactly the per-tensor one).
        oct_status s = oct_cuda_grow(c, (void **)&c->s, &c->s_bytes, (size_t)m * sizeof(float));
        if (s != OCT_OK)
            return s;
        broadcast_scale<<<(unsigned)((m + 255) / 256 < 1024 ? (m + 255) / 256 : 1024), 256, 0,
                          st>>>(sa, m, c->s);
        if (cudaGetLastError() != cudaSuccess)
            return OCT_ERR_INTERNAL;
        sa = c->s;
        ka = OCT_SCALE_ROW;
    }
    // (per-token and block scales: as in oct_cuda_linear_fp8_dyn)
    const bool measured =
        (ka == OCT_SCALE_ROW || ka == OCT_SCALE_BLOCK128) && kw == ka && small_m_measured(c, path);
    if (ka == kw && ka != OCT_SCALE_TENSOR && ka != OCT_SCALE_MX32 && !measured &&
        use_gemv(c, m, k, path, ka)) {
        snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_%s",
                 ka == OCT_SCALE_ROW ? "row" : "block");
        return oct_cuda_gemv_w8a8_launch(m, n, k, a, sa, w, sw, ka, yo, true, st);
    }
    if (path == OCT_CUDA_PATH_GEMV)
        return OCT_ERR_UNSUPPORTED;
    const int64_t nkb = (k + 127) / 128;
    const oct_wgmma_args g = {m, n, k, a, w, ka, kw, sa, sw, nkb, 1, yo};
    if (ka == OCT_SCALE_BLOCK128 && kw == OCT_SCALE_BLOCK128 && c->lt_block_mn_major) {
        // Our GEMM reads the [m][k/128] scales as they are; cuBLASLt needs them
        // transposed, so it runs only when ours cannot.
        if (path != OCT_CUDA_PATH_LT) {
            oct_status s = large_gemm(c, &g, path, true, false, st, no_quant, false, no_stream);
            if (s != OCT_ERR_UNSUPPORTED || path == OCT_CUDA_PATH_WGMMA)
                return s;
        }
        oct_status s =
            oct_cuda_grow(c, (void **)&c->s, &c->s_bytes, (size_t)(m * nkb) * sizeof(float));
        if (s != OCT_OK)
            return s;
        transpose_scales<<<(unsigned)((m * nkb + 255) / 256), 256, 0, st>>>(sa, m, nkb, c->s);
        if (cudaGetLastError() != cudaSuccess)
            return OCT_ERR_INTERNAL;
        s = oct_cuda_lt_gemm(c, m, n, k, a, ka, c->s, w, kw, sw, yo, st);
        if (s != OCT_ERR_UNSUPPORTED || path != OCT_CUDA_PATH_AUTO)
            return s;
        // No cuBLASLt block kernel either (M % 4 != 0): the streaming kernel, 64
        // tokens per weight pass, on the scales as given.
        snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_block(fallback)");
        return oct_cuda_gemv_w8a8_launch_strided(m, n, k, a, sa, nkb, 1, w, sw, OCT_SCALE_BLOCK128,
                                                 yo, true, st);
    }
    return large_gemm(c, &g, path, true, true, st, no_quant, false, no_stream);
}
