/* hopper.h — sm_90 primitives for the .cu files of src/kernels/cuda/ (C++ only):
 * mbarriers, the bulk and tensor copy engine (TMA), and the FP8 warpgroup MMA
 * (wgmma, sm_90a).  Every helper compiles to nothing on other targets; the
 * launchers only use kernels built from them on a compute capability 9.0 device.
 * PTX names and operand rules: the PTX ISA, sections "mbarrier", "cp.async.bulk
 * .tensor" and "Asynchronous Warpgroup Level Matrix Multiply-Accumulate". */
#ifndef OCTET_CUDA_HOPPER_H
#define OCTET_CUDA_HOPPER_H

#include <stdint.h>

#include "kernels/cuda/cuda_impl.h" /* oct_smem_u32 */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define OCT_HAS_SM90 1
#endif
/* wgmma and setmaxnreg exist only in the arch-specific sm_90a target. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define OCT_HAS_WGMMA 1
#endif

/* ---- mbarriers ---- */

__device__ __forceinline__ void oct_mbar_init(uint64_t *bar, uint32_t count)
{
#ifdef OCT_HAS_SM90
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(oct_smem_u32(bar)), "r"(count));
#endif
}

/* Makes initialized barriers visible to the other threads and to the copy engine
 * (then a block barrier). */
__device__ __forceinline__ void oct_mbar_init_fence(void)
{
#ifdef OCT_HAS_SM90
    asm volatile("fence.mbarrier_init.release.cluster;\n"
                 "fence.proxy.async.shared::cta;" ::
                     : "memory");
#endif
}

/* One arrival that also expects `bytes` of copy-engine transactions. */
__device__ __forceinline__ void oct_mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
#ifdef OCT_HAS_SM90
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(oct_smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
#endif
}

__device__ __forceinline__ void oct_mbar_arrive(uint64_t *bar)
{
#ifdef OCT_HAS_SM90
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(oct_smem_u32(bar)) : "memory");
#endif
}

/* Spins until the phase with this parity has completed (a fresh barrier counts
 * its "previous" phase, parity 1, as complete). */
__device__ __forceinline__ void oct_mbar_wait(uint64_t *bar, uint32_t parity)
{
#ifdef OCT_HAS_SM90
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n"
                 "}\n" ::"r"(oct_smem_u32(bar)),
                 "r"(parity)
                 : "memory");
#endif
}

/* Named barrier ID (1..15; 0 is __syncthreads's): completes when `threads`
 * threads (a multiple of 32) have arrived, so with one ID per warpgroup a
 * warpgroup syncs without the others.  ID is a constant: with a register
 * operand ptxas reserves all 16 barriers. */
template <int ID> __device__ __forceinline__ void oct_bar_sync(int threads)
{
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "r"(threads) : "memory");
}

/* Arrives on named barrier ID without waiting (the other side of oct_bar_sync:
 * `threads` counts both the arriving and the syncing threads). */
template <int ID> __device__ __forceinline__ void oct_bar_arrive(int threads)
{
    asm volatile("bar.arrive %0, %1;" ::"n"(ID), "r"(threads) : "memory");
}

/* ---- the copy engine ---- */

/* `bytes` contiguous bytes global -> shared, completing on bar. */
__device__ __forceinline__ void oct_bulk_g2s(void *dst, const void *src, uint32_t bytes,
                                             uint64_t *bar)
{
#ifdef OCT_HAS_SM90
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(oct_smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(oct_smem_u32(bar))
        : "memory");
#endif
}

/* One box of a 2-D tensor map (a CUtensorMap kernel parameter) at element
 * coordinates (c0 inner, c1 outer) -> shared, completing on bar.  Elements
 * outside the tensor are filled with zeros and still count as transactions. */
__device__ __forceinline__ void oct_tma_load_2d(void *dst, const void *map, uint64_t *bar, int c0,
                                                int c1)
{
#ifdef OCT_HAS_SM90
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" ::"r"(oct_smem_u32(dst)),
                 "l"((uint64_t)map), "r"(oct_smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
#endif
}

__device__ __forceinline__ void oct_tma_prefetch_map(const void *map)
{
#ifdef OCT_HAS_SM90
    asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)map) : "memory");
#endif
}

/* Makes this thread's generic-proxy writes to shared memory (stores, cp.async
 * copies already waited for) visible to the async proxy: wgmma reads its
 * shared operands there. */
__device__ __forceinline__ void oct_fence_proxy_async(void)
{
#ifdef OCT_HAS_SM90
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* ---- warpgroup MMA (sm_90a) ---- */

/* Shared-memory matrix descriptor of a K-major tile stored with the 128-byte
 * swizzle (what a TMA box of 128-byte rows with CU_TENSOR_MAP_SWIZZLE_128B
 * writes): 8-row groups 1024 bytes apart, the tile 1024-byte aligned.  Moving
 * along K inside the 128-byte row is adding bytes / 16 to the descriptor. */
__device__ __forceinline__ uint64_t oct_wgmma_desc_sw128(const void *tile)
{
    const uint64_t addr = oct_smem_u32(tile);
    return ((addr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) /* leading offset: unused */
           | ((uint64_t)(1024 >> 4) << 32)                /* stride between 8-row groups */
           | ((uint64_t)1 << 62);                         /* 128-byte swizzle */
}

__device__ __forceinline__ void oct_wgmma_fence(void)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void oct_wgmma_commit(void)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

/* Waits until at most N committed wgmma groups of this warpgroup are pending. */
template <int N> __device__ __forceinline__ void oct_wgmma_wait(void)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/* Keeps the compiler from moving reads or writes of accumulator registers across
 * the asynchronous wgmma (call on every register after a wait, before a fence). */
template <int R> __device__ __forceinline__ void oct_wgmma_reg_fence(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Register budget per thread of a warpgroup (setmaxnreg, sm_90a): the kernel
 * must have a register cap (__launch_bounds__(threads, min_blocks)), and the
 * warpgroups' new budgets must fit the registers the launch allocated. */
template <int R> __device__ __forceinline__ void oct_setmaxnreg_inc(void)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
#endif
}
template <int R> __device__ __forceinline__ void oct_setmaxnreg_dec(void)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
#endif
}

/* d[64 x N] (+)= A[64 x 32] * B[N x 32]^T, E4M3 x E4M3 -> f32, both operands
 * K-major in shared memory (descriptors above); acc == 0 overwrites d.  Register
 * d[4j + c] of thread (warp w, lane l) of the warpgroup holds row 16w + l/4
 * (+8 for c >= 2), column 8j + 2(l%4) + c%2.  The operand lists are spelled out:
 * inline PTX takes no register arrays. */
__device__ __forceinline__ void oct_wgmma_e4m3_n8(float (&d)[4], uint64_t da, uint64_t db, int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3}, %4, %5, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n16(float (&d)[8], uint64_t da, uint64_t db, int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7])
                 : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n32(float (&d)[16], uint64_t da, uint64_t db,
                                                   int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n64(float (&d)[32], uint64_t da, uint64_t db,
                                                   int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n128(float (&d)[64], uint64_t da, uint64_t db,
                                                    int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%"
                 "42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%"
                 "62,%63}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n224(float (&d)[112], uint64_t da, uint64_t db,
                                                    int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %114, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n224k32.f32.e4m3.e4m3 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
        "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,"
        "%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,"
        "%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,"
        "%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,"
        "%107,%108,%109,%110,%111"
        "}, %112, %113, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111])
        : "l"(da), "l"(db), "r"(acc));
#endif
}

__device__ __forceinline__ void oct_wgmma_e4m3_n256(float (&d)[128], uint64_t da, uint64_t db,
                                                    int acc)
{
#ifdef OCT_HAS_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"
        "24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%"
        "46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%"
        "68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%"
        "90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%"
        "110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127},"
        " %128, %129, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(acc));
#endif
}

/* The same, by tile width N (8, 16, 32, 64, 128, 224 or 256). */
template <int N>
__device__ __forceinline__ void oct_wgmma_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db, int acc)
{
    if constexpr (N == 8)
        oct_wgmma_e4m3_n8(d, da, db, acc);
    else if constexpr (N == 16)
        oct_wgmma_e4m3_n16(d, da, db, acc);
    else if constexpr (N == 32)
        oct_wgmma_e4m3_n32(d, da, db, acc);
    else if constexpr (N == 64)
        oct_wgmma_e4m3_n64(d, da, db, acc);
    else if constexpr (N == 128)
        oct_wgmma_e4m3_n128(d, da, db, acc);
    else if constexpr (N == 224)
        oct_wgmma_e4m3_n224(d, da, db, acc);
    else
        oct_wgmma_e4m3_n256(d, da, db, acc);
}

#endif
