/* gemm_avx2.c — the AVX2 + FMA linear kernel (placeholder until it lands). */
#include "kernels/cpu/gemm.h"

static const char *avx2_cannot(const oct_linear_desc *d)
{
    (void)d;
    return "not implemented yet";
}

static oct_status avx2_prepare(oct_linear *l, oct_error *err)
{
    (void)l;
    (void)err;
    return OCT_ERR_UNSUPPORTED;
}

static oct_status avx2_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                           oct_error *err)
{
    (void)l;
    (void)m;
    (void)in;
    (void)y;
    (void)err;
    return OCT_ERR_UNSUPPORTED;
}

const oct_linear_kernel oct_kernel_cpu_avx2 = {
    "cpu_avx2_fma", "avx2", OCT_CPU_AVX2, avx2_cannot, {avx2_prepare, avx2_run},
};
