#pragma once
// What the training backend can do on this machine. Torch-free header: the CLI and the other
// modules ask through here and never see LibTorch types.

#include <string>

namespace vt::training {

struct RuntimeInfo {
  std::string torch_version;  // e.g. "1.13.1"
  bool cuda_available = false;
  int cuda_device_count = 0;
};

RuntimeInfo runtime_info();

// How every process runs a TorchScript module (script/module.cpp): LibTorch's graph
// executor with its optimisation off, so that call 1000 computes as call 1. Committed as the
// environment's `script_executor` for TorchScript tasks (docs/environment.md).
inline constexpr const char* kScriptExecutor = "graph-executor-optimize-off";

// LibTorch kernels that veritrain repairs in every process that trains (libtorch_repairs.cpp):
// calls whose result depended on memory the kernel never wrote get the bits of the same call on
// dense operands. Committed as the environment's `libtorch_repairs` (docs/environment.md): a
// run without them may hold bits no replay reproduces.
inline constexpr const char* kLibTorchRepairs = "gelu-backward-dense-grad";
// Installs them; idempotent. Called before a trainer is built.
void install_libtorch_repairs();

// The CPU kernel level ATen dispatches to, lower case ("default", "avx2", "avx512"). ATen
// chooses it once per process, at its first kernel (ATEN_CPU_CAPABILITY may set it), so asking
// fixes it for the rest of the process.
std::string aten_cpu_capability();

}  // namespace vt::training
