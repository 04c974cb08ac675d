#include "training/runtime.h"

#include <torch/cuda.h>
#include <torch/version.h>

namespace vt::training {

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  info.torch_version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_device_count = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  return info;
}

}  // namespace vt::training
