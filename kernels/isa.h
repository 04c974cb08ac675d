#pragma once
// The instruction set the portable kernels use on this machine. Wider vectors process more
// outputs at once; every output's arithmetic is the same sequence of IEEE operations at any
// width, so the choice changes speed, never bits (docs/portable.md, "Vector lanes").

namespace vt::kernels {

// kScalar: an x86-64 CPU without FMA instructions, whose products call the C library's fmaf.
enum class Isa { kScalar, kGeneric, kAvx2, kAvx512 };

// The best this CPU runs, lowered by VT_KERNELS_ISA or ATEN_CPU_CAPABILITY when either is set
// (scalar, generic/default, avx2, avx512): tests use them to run every code path on one machine.
Isa isa();
const char* isa_name(Isa isa);

}  // namespace vt::kernels
