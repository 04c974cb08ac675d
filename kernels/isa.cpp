#include "kernels/isa.h"

#include <cstdlib>
#include <string>

namespace vt::kernels {
namespace {

Isa detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (!__builtin_cpu_supports("fma")) return Isa::kScalar;
  if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
#endif
  return Isa::kGeneric;
}

Isa cap(Isa best) {
  for (const char* name : {"VT_KERNELS_ISA", "ATEN_CPU_CAPABILITY"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    const std::string s(v);
    Isa wanted = best;
    if (s == "scalar") wanted = Isa::kScalar;
    if (s == "generic" || s == "default") wanted = Isa::kGeneric;
    if (s == "avx2") wanted = Isa::kAvx2;
    if (s == "avx512") wanted = Isa::kAvx512;
    return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
  }
  return best;
}

}  // namespace

Isa isa() {
  static const Isa chosen = cap(detect());
  return chosen;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kGeneric:
      return "generic";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace vt::kernels
