#include "protocol/environment.h"

#include <algorithm>

namespace vt {

const std::vector<EnvironmentField>& environment_fields() {
  // name, CPU condition, CUDA condition, meaning
  static const std::vector<EnvironmentField> kFields = {
      {"arithmetic", false, false, "the task's determinism level, as the trainer ran it"},
      {"device", true, true, "cpu or cuda"},
      {"torch", true, true, "LibTorch version"},
      {"intra_op_threads", true, true, "LibTorch's intra-op thread count"},
      {"cpu_capability", true, false,
       "ATen's CPU kernel level in use (default, avx2, avx512; ATEN_CPU_CAPABILITY)"},
      {"onednn_isa", true, false,
       "oneDNN's effective instruction set (its JIT convolutions; ONEDNN_MAX_CPU_ISA)"},
      {"blas_sha256", true, false, "SHA-256 of the BLAS library LibTorch loaded"},
      {"blas_path", false, false, "where that BLAS library is"},
      {"cpu_model", false, false, "the CPU's model name"},
      {"kernels", false, false, "the instruction set veritrain's portable kernels use"},
      {"gpu_name", false, true, "the GPU's name"},
      {"compute_capability", false, true, "the GPU's compute capability"},
      {"sm_count", false, true, "the GPU's multiprocessor count (cuBLAS splits work by it)"},
      {"cuda_runtime", false, true, "CUDA runtime version"},
      {"cublas", false, true, "cuBLAS version"},
      {"cudnn", false, true, "cuDNN version"},
      {"cuda_driver", false, false, "CUDA driver version"},
      {"tf32", false, true, "TF32 allowed in cuBLAS and cuDNN (the task's precision)"},
      {"libtorch_repairs", true, false,
       "the LibTorch kernels veritrain repairs (gelu-backward-dense-grad: a GELU's gradient read "
       "in its own layout)"},
      {"script_executor", true, true,
       "how TorchScript runs the module (graph-executor-optimize-off: op by op on every call)",
       /*torchscript_only=*/true},
  };
  return kFields;
}

const EnvironmentField* find_environment_field(std::string_view name) {
  for (const EnvironmentField& f : environment_fields()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool is_exactness_condition(std::string_view field, const Task& task) {
  if (task.determinism != Determinism::kExact) return false;
  const EnvironmentField* f = find_environment_field(field);
  if (f == nullptr) return false;
  if (f->torchscript_only && !task.model.torchscript()) return false;
  return task.device == Device::kCuda ? f->cuda_condition : f->cpu_condition;
}

nlohmann::json environment_to_json(const Environment& env) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : env) out[name] = value;
  return out;
}

Result<Environment> environment_from_json(const nlohmann::json& value, std::string_view where) {
  const std::string w(where);
  if (!value.is_object()) return invalid_input(w + ": expected an object of text fields");
  if (value.size() > kMaxEnvironmentFields) {
    return invalid_input(w + ": " + std::to_string(value.size()) + " fields, more than the " +
                         std::to_string(kMaxEnvironmentFields) + " allowed");
  }
  Environment env;
  for (const auto& [name, v] : value.items()) {
    if (name.empty() || name.size() > 64)
      return invalid_input(w + ": a field name of " + std::to_string(name.size()) +
                           " bytes (expected 1-64)");
    std::string path = w;
    path.append(".").append(name);
    if (!v.is_string()) return invalid_input(path.append(": expected a string"));
    const auto& text = v.get_ref<const std::string&>();
    if (text.size() > kMaxEnvironmentValue) {
      return invalid_input(path.append(": ")
                               .append(std::to_string(text.size()))
                               .append(" bytes, more than the ")
                               .append(std::to_string(kMaxEnvironmentValue))
                               .append(" allowed"));
    }
    env.emplace(name, text);
  }
  return env;
}

std::vector<EnvironmentDifference> condition_differences(const Environment& a, const Environment& b,
                                                         const Task& task) {
  std::vector<EnvironmentDifference> out;
  for (const EnvironmentField& f : environment_fields()) {
    if (!is_exactness_condition(f.name, task)) continue;
    const std::string name(f.name);
    auto ia = a.find(name);
    auto ib = b.find(name);
    const std::string va = ia == a.end() ? std::string() : ia->second;
    const std::string vb = ib == b.end() ? std::string() : ib->second;
    if ((ia == a.end()) != (ib == b.end()) || va != vb) out.push_back({name, va, vb});
  }
  return out;
}

Status validate_environment_pin(const Task& task, std::string_view where) {
  for (const auto& [field, values] : task.environments) {
    const std::string path = std::string(where) + ": environments." + field;
    if (find_environment_field(field) == nullptr) {
      std::string known;
      for (const EnvironmentField& f : environment_fields())
        known.append(known.empty() ? "" : ", ").append(f.name);
      return invalid_input(std::string(path)
                               .append(": unknown field (an environment has: ")
                               .append(known)
                               .append(")"));
    }
    if (values.empty() || values.size() > 64)
      return invalid_input(path + ": expected 1-64 accepted values, got " +
                           std::to_string(values.size()));
    for (const std::string& v : values) {
      if (v.empty() || v.size() > kMaxEnvironmentValue)
        return invalid_input(path + ": expected values of 1-" +
                             std::to_string(kMaxEnvironmentValue) + " bytes");
    }
  }
  return {};
}

std::vector<std::string> pin_violations(const Environment& committed, const Task& task) {
  std::vector<std::string> out;
  for (const auto& [field, accepted] : task.environments) {
    auto it = committed.find(field);
    const std::string got = it == committed.end() ? std::string() : it->second;
    if (std::find(accepted.begin(), accepted.end(), got) != accepted.end()) continue;
    std::string list;
    for (const std::string& v : accepted)
      list.append(list.empty() ? "\"" : ", \"").append(v) += '"';
    std::string line = field;
    if (it == committed.end()) {
      line.append(" is not committed; the task pins it to ").append(list);
    } else {
      line.append(" \"").append(got).append("\" is not among the values the task pins (");
      line.append(list) += ')';
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::string exact_mode_warning(
    const Task& task, const std::map<std::string, std::vector<std::string>>& replayable_here) {
  if (task.determinism != Determinism::kExact) return "";
  if (task.device == Device::kCuda) {
    // Pins are for CPU tasks (--pin-environment refuses others): the GPU is the condition.
    return "exact mode on CUDA: a verifier judges it only on a GPU like the provider's (the\n"
           "  same compute capability and SM count, CUDA, cuBLAS, cuDNN and LibTorch;\n"
           "  docs/environment.md); elsewhere: inconclusive";
  }
  if (task.environments.empty()) {
    return "exact mode, and the task pins no arithmetic environment:\n"
           "  a verifier judges it only where it reproduces the provider's (CPU kernel level,\n"
           "  oneDNN ISA, BLAS, LibTorch; docs/environment.md); elsewhere: inconclusive\n"
           "  to pin what this machine replays: veritrain task init ... --pin-environment";
  }
  std::string beyond;
  for (const auto& [field, values] : task.environments) {
    auto here = replayable_here.find(field);
    if (here == replayable_here.end()) continue;
    for (const std::string& v : values) {
      if (std::find(here->second.begin(), here->second.end(), v) == here->second.end())
        beyond.append(beyond.empty() ? "" : ", ").append(field).append(" ").append(v);
    }
  }
  if (beyond.empty()) return "";
  return "exact mode: the task accepts environments this machine cannot replay (" + beyond +
         "): a provider using one of them would be unjudgeable here (verdict inconclusive)";
}

std::string arithmetic_of(const Environment& committed) {
  auto it = committed.find("arithmetic");
  const std::string mode = it == committed.end() ? std::string() : it->second;
  if (mode == "portable")
    return "portable: veritrain's own kernels, the same bits on any CPU and thread count";
  if (mode == "exact") return "exact: LibTorch's kernels, bit for bit in the committed environment";
  if (mode == "tolerance") return "tolerance: LibTorch's kernels, within calibrated thresholds";
  return "unknown (no arithmetic environment committed)";
}

}  // namespace vt
