// The gemm inner loops for AVX-512 (compiled with -mavx512f; contraction stays off): 16 lanes,
// two vectors wide, and one vector wide for products with at most 16 columns (a convolution's
// weight gradient with 16 output channels), where the wide tile would compute half in vain; and
// the depthwise convolution's loops.
#define VT_GEMM_NAMESPACE avx512
#define VT_GEMM_W 16
#define VT_GEMM_MR 8
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
// After the product loops: it builds on their helpers (once, at the full width).
#include "kernels/depthwise_micro.h"
#undef VT_GEMM_NAMESPACE
#undef VT_GEMM_MR
#undef VT_GEMM_NV
#define VT_GEMM_NAMESPACE avx512_narrow
#define VT_GEMM_MR 16
#define VT_GEMM_NV 1
#include "kernels/gemm_micro.h"
