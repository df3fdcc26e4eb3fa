// ops_sample.cu — token sampling from f32 logits, one thread block per row.
//
// Greedy (temperature 0): argmax, lowest id on ties (src/engine/sampler.c).
// Otherwise the probabilities p_v = expf((l_v - max) / T) (unnormalized, the
// max is 1) are filtered as sampler.c does -- top-k, then min-p (p >= min_p), then
// top-p over what is left -- without sorting: every filter keeps a prefix of the
// order "descending p, ascending id", so each is a threshold (pb, id) on that
// order (v kept iff bits(p_v) > pb, or bits(p_v) == pb and v <= id; non-negative
// floats order like their bits).  A threshold is found by a radix select over the
// 32 bits of p (4 passes of 256-bin histograms of counts or of masses, in double)
// and a scan in id order over the ties at the last value.  The draw is one
// Philox4x32-10 number for (seed, step, stream), mapped into the kept mass in id
// order: the same distribution as sampler.c's (which walks the sorted order),
// not its random stream.  p is recomputed from the logits in each pass (no
// workspace); the row stays in L2.
#include "kernels/cuda/cuda_impl.h"

namespace
{

constexpr int kST = 1024; // threads per row

struct Thr {
    uint32_t pb; // value bits of the last kept probability
    int32_t id;  // ... and the largest kept id at that value
};

__device__ __forceinline__ bool kept(uint32_t pbv, int32_t v, Thr t)
{
    return pbv > t.pb || (pbv == t.pb && v <= t.id);
}

__device__ __forceinline__ Thr tighter(Thr a, Thr b)
{
    return (a.pb > b.pb || (a.pb == b.pb && a.id < b.id)) ? a : b;
}

struct Row {
    const float *lg;
    int64_t V;
    float mx, T;
    __device__ __forceinline__ float prob(int64_t v) const
    {
        return expf(__fdiv_rn(__fsub_rn(lg[v], mx), T)); // sampler.c: expf((l - mx) / T)
    }
};

__device__ double block_sum(double v)
{
    __shared__ double part[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0.0;
    for (int i = 0; i < kST / 32; i++)
        s += part[i];
    return s;
}

// Exclusive prefix sum over the block in thread order (and the total).
template <class T> __device__ T block_excl_scan(T v, T *total)
{
    __shared__ T part[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    T inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o)
            inc += n;
    }
    __syncthreads();
    if (lane == 31)
        part[wid] = inc;
    __syncthreads();
    T before = 0, all = 0;
    for (int i = 0; i < kST / 32; i++) {
        if (i < wid)
            before += part[i];
        all += part[i];
    }
    *total = all;
    return before + inc - v;
}

// One logit into a thread's running argmax: the first non-NaN, then larger ones.
__device__ __forceinline__ void argmax_take(float x, int32_t v, float *bm, int32_t *bi, int *nf)
{
    *nf |= x != x || x == INFINITY;
    if (x > *bm || (*bi == INT32_MAX && !(x != x))) {
        *bm = x;
        *bi = v;
    }
}

// Max logit and its lowest id (NaNs never win, as in sampler.c's v > best);
// *bad: some logit is NaN or +Inf (the host sampler's error).
__device__ void block_argmax(const float *lg, int64_t V, float *mx, int32_t *id, bool *bad)
{
    __shared__ float pm[32];
    __shared__ int32_t pi[32];
    float bm = -INFINITY;
    int32_t bi = INT32_MAX;
    int nonfinite = 0;
    // A thread visits its ids in increasing order, so the strict "larger" keeps
    // its lowest id of the max.  Aligned rows: kVec float4 loads in flight per
    // thread (the scalar loop waits on the L2 once per element: 22 us for 128K).
    int64_t v = threadIdx.x;
    if (((uintptr_t)lg & 15u) == 0) {
        constexpr int kVec = 4;
        const float4 *l4 = reinterpret_cast<const float4 *>(lg);
        const int64_t n4 = V / 4;
        for (int64_t i = threadIdx.x; i < n4; i += (int64_t)kST * kVec) {
            float4 r[kVec];
#pragma unroll
            for (int u = 0; u < kVec; u++)
                if (i + (int64_t)u * kST < n4)
                    r[u] = __ldg(l4 + i + (int64_t)u * kST);
#pragma unroll
            for (int u = 0; u < kVec; u++) {
                const int64_t j = i + (int64_t)u * kST;
                if (j >= n4)
                    break;
                argmax_take(r[u].x, (int32_t)(4 * j), &bm, &bi, &nonfinite);
                argmax_take(r[u].y, (int32_t)(4 * j + 1), &bm, &bi, &nonfinite);
                argmax_take(r[u].z, (int32_t)(4 * j + 2), &bm, &bi, &nonfinite);
                argmax_take(r[u].w, (int32_t)(4 * j + 3), &bm, &bi, &nonfinite);
            }
        }
        v = 4 * n4 + threadIdx.x;
    }
    for (; v < V; v += kST)
        argmax_take(lg[v], (int32_t)v, &bm, &bi, &nonfinite);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, bm, o);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (om > bm || (om == bm && oi < bi) || (bi == INT32_MAX && oi != INT32_MAX)) {
            bm = om;
            bi = oi;
        }
    }
    *bad = __syncthreads_or(nonfinite) != 0;
    if ((threadIdx.x & 31) == 0) {
        pm[threadIdx.x >> 5] = bm;
        pi[threadIdx.x >> 5] = bi;
    }
    __syncthreads();
    bm = -INFINITY;
    bi = INT32_MAX;
    for (int i = 0; i < kST / 32; i++)
        if (pm[i] > bm || (pm[i] == bm && pi[i] < bi) || (bi == INT32_MAX && pi[i] != INT32_MAX)) {
            bm = pm[i];
            bi = pi[i];
        }
    *mx = bm;
    *id = bi == INT32_MAX ? 0 : bi; // all NaN: id 0, as sampler.c
}

// The tightest threshold t inside lo whose kept weight (count, or mass when
// MASS) reaches target: the first prefix of the order that reaches it.  lo
// itself when even all of lo does not.
template <bool MASS> __device__ Thr select_thr(const Row &R, Thr lo, double target)
{
    __shared__ double hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ double s_above;
    __shared__ int s_found;
    uint32_t prefix = 0;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_above = 0.0;
        s_found = 1;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kST)
            hist[b] = 0.0;
        __syncthreads();
        const uint32_t hmask = shift == 24 ? 0u : 0xFFFFFFFFu << (shift + 8);
        for (int64_t v = threadIdx.x; v < R.V; v += kST) {
            const float p = R.prob(v);
            const uint32_t pbv = __float_as_uint(p);
            if ((pbv & hmask) == prefix && kept(pbv, (int32_t)v, lo))
                atomicAdd(&hist[(pbv >> shift) & 255u], MASS ? (double)p : 1.0);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double acc = s_above;
            int b = 255;
            for (; b >= 0; b--) {
                if (acc + hist[b] >= target)
                    break;
                acc += hist[b];
            }
            if (b < 0)
                s_found = 0;
            else {
                s_above = acc;
                s_prefix |= (uint32_t)b << shift;
            }
        }
        __syncthreads();
        if (!s_found)
            return lo;
        prefix = s_prefix;
    }
    // ties at value `prefix`, in id order: the first r of them complete the target
    const double above = s_above;
    const double w = MASS ? (double)__uint_as_float(prefix) : 1.0;
    const int64_t chunk = (R.V + kST - 1) / kST;
    const int64_t c0 = (int64_t)threadIdx.x * chunk, c1 = min(c0 + chunk, R.V);
    long long cnt = 0;
    for (int64_t v = c0; v < c1; v++) {
        const uint32_t pbv = __float_as_uint(R.prob(v));
        cnt += pbv == prefix && kept(pbv, (int32_t)v, lo);
    }
    long long all;
    const long long before = block_excl_scan<long long>(cnt, &all);
    const double rd = ceil((target - above) / w); // w > 0: the bin had weight
    long long r = rd < 1.0 ? 1 : rd > (double)all ? all : (long long)rd;
    while (r > 1 && above + (double)(r - 1) * w >= target)
        r--;
    while (r < all && above + (double)r * w < target)
        r++;
    r = r < 1 ? 1 : r > all ? all : r;
    __shared__ int32_t s_id;
    if (threadIdx.x == 0)
        s_id = lo.pb == prefix ? lo.id : INT32_MAX;
    __syncthreads();
    if (before < r && r <= before + cnt) {
        long long k = before;
        for (int64_t v = c0; v < c1; v++) {
            const uint32_t pbv = __float_as_uint(R.prob(v));
            if (pbv == prefix && kept(pbv, (int32_t)v, lo) && ++k == r) {
                s_id = (int32_t)v;
                break;
            }
        }
    }
    __syncthreads();
    Thr t = {prefix, s_id};
    __syncthreads();
    return tighter(t, lo);
}

__device__ uint4 philox4x32_10(uint4 c, uint2 k)
{
#pragma unroll
    for (int i = 0; i < 10; i++) {
        const uint32_t lo0 = c.x * 0xD2511F53u, hi0 = __umulhi(c.x, 0xD2511F53u);
        const uint32_t lo1 = c.z * 0xCD9E8D57u, hi1 = __umulhi(c.z, 0xCD9E8D57u);
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += 0x9E3779B9u;
        k.y += 0xBB67AE85u;
    }
    return c;
}

__global__ void __launch_bounds__(kST)
    sample_kernel(const float *__restrict__ logits, int64_t V,
                  const oct_cuda_sample_params *__restrict__ params, int32_t *__restrict__ ids,
                  float *__restrict__ logprob)
{
    const int64_t row = blockIdx.x;
    const oct_cuda_sample_params P = params[row];
    Row R;
    R.lg = logits + row * V;
    R.V = V;
    R.T = P.temperature;
    int32_t best;
    bool bad;
    block_argmax(R.lg, V, &R.mx, &best, &bad);
    if (bad) { // uniform over the block
        if (threadIdx.x == 0) {
            ids[row] = -1;
            if (logprob)
                logprob[row] = __int_as_float(0x7FC00000);
        }
        return;
    }
    int32_t pick = best;
    if (P.temperature != 0.0f) {
        Thr t = {0u, (int32_t)V}; // everything
        if (P.top_k > 0 && P.top_k < V)
            t = select_thr<false>(R, t, (double)P.top_k);
        if (P.min_p > 0.0f) { // p_max = expf(0) = 1
            const Thr mp = {__float_as_uint(P.min_p * 1.0f), (int32_t)V};
            t = tighter(t, mp);
        }
        double part = 0.0;
        for (int64_t v = threadIdx.x; v < V; v += kST) {
            const float p = R.prob(v);
            if (kept(__float_as_uint(p), (int32_t)v, t))
                part += (double)p;
        }
        double total = block_sum(part);
        if (P.top_p < 1.0f && total > 0.0) {
            t = select_thr<true>(R, t, (double)P.top_p * total);
            part = 0.0;
            for (int64_t v = threadIdx.x; v < V; v += kST) {
                const float p = R.prob(v);
                if (kept(__float_as_uint(p), (int32_t)v, t))
                    part += (double)p;
            }
            total = block_sum(part);
        }
        const uint4 rnd = philox4x32_10(make_uint4((uint32_t)P.step, (uint32_t)(P.step >> 32),
                                                   (uint32_t)P.stream, (uint32_t)(P.stream >> 32)),
                                        make_uint2((uint32_t)P.seed, (uint32_t)(P.seed >> 32)));
        const double u = (double)((((uint64_t)rnd.x << 32) | rnd.y) >> 11) * 0x1p-53;
        const double target = u * total;
        // in id order: thread chunks, their masses scanned
        const int64_t chunk = (V + kST - 1) / kST;
        const int64_t c0 = (int64_t)threadIdx.x * chunk, c1 = min(c0 + chunk, V);
        double cm = 0.0;
        int32_t last = -1;
        for (int64_t v = c0; v < c1; v++) {
            const float p = R.prob(v);
            if (kept(__float_as_uint(p), (int32_t)v, t)) {
                cm += (double)p;
                last = (int32_t)v;
            }
        }
        double all;
        const double before = block_excl_scan<double>(cm, &all);
        __shared__ int32_t s_pick, s_last;
        if (threadIdx.x == 0) {
            s_pick = INT32_MAX;
            s_last = -1;
        }
        __syncthreads();
        if (last >= 0)
            atomicMax(&s_last, last);
        if (cm > 0.0 && before <= target && target < before + cm) {
            double acc = before;
            int32_t got = last;
            for (int64_t v = c0; v < c1; v++) {
                const float p = R.prob(v);
                if (kept(__float_as_uint(p), (int32_t)v, t)) {
                    acc += (double)p;
                    if (target < acc) {
                        got = (int32_t)v;
                        break;
                    }
                }
            }
            atomicMin(&s_pick, got);
        }
        __syncthreads();
        pick = s_pick != INT32_MAX ? s_pick : s_last >= 0 ? s_last : best;
    }
    if (logprob) { // log-softmax at temperature 1
        double part = 0.0;
        for (int64_t v = threadIdx.x; v < V; v += kST)
            part += (double)expf(__fsub_rn(R.lg[v], R.mx));
        const double sum = block_sum(part);
        if (threadIdx.x == 0)
            logprob[row] = __fsub_rn(__fsub_rn(R.lg[pick], R.mx), (float)log(sum));
    }
    if (threadIdx.x == 0)
        ids[row] = pick;
}

} // namespace

extern "C" size_t oct_cuda_sample_workspace_bytes(int64_t n, int64_t V)
{
    (void)n, (void)V;
    return 0;
}

extern "C" oct_status oct_cuda_sample(const float *logits, int64_t n, int64_t V,
                                      const oct_cuda_sample_params *p, int32_t *ids, float *logprob,
                                      void *ws, size_t ws_bytes, void *stream)
{
    (void)ws, (void)ws_bytes;
    if (n < 0 || V <= 0 || V > INT32_MAX - 1 || n > INT32_MAX || (n > 0 && (!logits || !p || !ids)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "sample: n %lld, V %lld", (long long)n,
                                 (long long)V);
    if (n == 0)
        return OCT_OK;
    sample_kernel<<<(unsigned)n, kST, 0, oct_cuda_stream(stream)>>>(logits, V, p, ids, logprob);
    return oct_cuda_ops_launched("sample");
}
