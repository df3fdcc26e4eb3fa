/* octet.h — the public header of octet, FP8 inference for LLMs.
 *
 * C11, usable from C++ (extern "C"), no CUDA or SIMD types.
 *
 * Conventions (docs/API.md):
 *  - Public = declared here.  Each function is marked OCT_API; liboctet.so
 *    exports those and nothing else (everything under src/ is internal).
 *  - Fallible functions return oct_status (OCT_OK == 0) and, where they take an
 *    `oct_error *err`, fill it with a message (and a byte offset where one
 *    applies).  `err` may always be NULL.
 *  - Pointers a getter returns are never freed by the caller: each getter says
 *    whether it is static or owned by an object (valid while that object lives).
 *  - Dimensions and counts are int64_t, byte sizes size_t, FP8 codes uint8_t,
 *    bf16 / fp16 values uint16_t bit patterns.
 *  - Every oct_*_free(NULL) is a no-op.  A constructor that fails leaves
 *    nothing allocated.
 *  - The library prints nothing; it logs through the callback set with
 *    oct_log_set().
 *  - Thread safety: the conversion and quantization functions are pure and
 *    reentrant.  oct_log_set / oct_set_allocator / oct_cpu_force change
 *    process-wide settings; call them before starting threads.
 */
#ifndef OCTET_H
#define OCTET_H

/* By concern; each header also compiles alone. */
#include "octet/core.h"
#include "octet/fp8.h"
#include "octet/quant.h"
#include "octet/kernels.h"
#include "octet/io.h"
#include "octet/tokenizer.h"
#include "octet/model.h"
#include "octet/engine.h"
#include "octet/server.h"

#endif
