// The gemm inner loop for AVX-512 (compiled with -mavx512f; contraction stays off): 16 lanes.
#define VT_GEMM_NAMESPACE avx512
#define VT_GEMM_W 16
#define VT_GEMM_MR 8
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
