#pragma once
// VT_WIDE: compile a function once per vector width (AVX-512, AVX2, baseline) and pick the
// widest the CPU has at load time. Only for code whose lanes hold separate values — copies, and
// element-wise IEEE operations each rounded on its own (the kernels are built without
// contraction) — so the width changes the speed and never a bit. A lambda handed to parallel_for
// is not inlined and stays baseline code: give its hot loop a VT_WIDE function of its own.
#if defined(__x86_64__)
#define VT_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VT_WIDE
#endif
