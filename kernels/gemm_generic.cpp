// The gemm inner loop with 4 lanes: on x86-64 for CPUs with FMA but without AVX2 (compiled with
// -mfma), elsewhere for any CPU (aarch64 has the fused multiply-add in its base set).
#define VT_GEMM_NAMESPACE generic
#define VT_GEMM_W 4
#define VT_GEMM_MR 4
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
// After the product loops: it builds on their helpers.
#include "kernels/depthwise_micro.h"
