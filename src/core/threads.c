/* threads.c — the OpenMP thread count kernels use. */
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"

static int g_threads; /* 0: default */

static int default_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void oct_threads_set(int n)
{
    g_threads = n > 0 ? n : 0;
    omp_set_num_threads(oct_threads_get());
}

int oct_threads_get(void)
{
    return g_threads > 0 ? g_threads : default_threads();
}
