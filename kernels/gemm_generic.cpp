// The gemm inner loop for any x86-64 (SSE2) or other CPU: 4 lanes.
#define VT_GEMM_NAMESPACE generic
#define VT_GEMM_W 4
#define VT_GEMM_MR 4
#define VT_GEMM_NV 2
#include "kernels/gemm_micro.h"
