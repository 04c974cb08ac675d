#include "training/runtime.h"

#include <ATen/Version.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cctype>
#include <string_view>

namespace vt::training {

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  info.torch_version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_device_count = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  return info;
}

std::string aten_cpu_capability() {
  // Both LibTorch generations print it in their build summary; 1.13 exports no other way.
  const std::string config = at::show_config();
  constexpr std::string_view kLabel = "CPU capability usage: ";
  const auto pos = config.find(kLabel);
  if (pos == std::string::npos) return "unknown";
  std::string level;
  for (std::size_t i = pos + kLabel.size(); i < config.size() && config[i] != '\n'; ++i)
    level += static_cast<char>(std::tolower(static_cast<unsigned char>(config[i])));
  // The scalar level prints as "NO AVX"; ATEN_CPU_CAPABILITY calls it "default".
  if (level == "no avx") return "default";
  return level.empty() ? "unknown" : level;
}

}  // namespace vt::training
