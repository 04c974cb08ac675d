// The gemm inner loop for AVX2 with FMA (compiled with -mavx2 -mfma): 8 lanes.
#define VT_GEMM_NAMESPACE avx2
#define VT_GEMM_W 8
#define VT_GEMM_MR 6
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
// After the product loops: it builds on their helpers.
#include "kernels/depthwise_micro.h"
