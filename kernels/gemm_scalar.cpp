// The gemm inner loop for an x86-64 CPU without FMA instructions (before Haswell / Piledriver):
// compiled for the baseline, so each multiply-add is a call to the C library's fmaf, which
// rounds once as the instruction does. The same bits, many times slower.
#define VT_GEMM_NAMESPACE scalar
#define VT_GEMM_W 4
#define VT_GEMM_MR 4
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
// After the product loops: it builds on their helpers.
#include "kernels/depthwise_micro.h"
