// The arithmetic environment: LibTorch's version and CPU level (through runtime.cpp), and the
// libraries beneath it, found in this process by their C symbols (oneDNN, the CUDA libraries)
// and by the loaded-object list (BLAS), so that no header of theirs is needed to build.
#include "training/environment.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "common/mapped_file.h"
#include "common/sha256.h"
#include "kernels/isa.h"
#include "kernels/version.h"
#include "training/prepared_task.h"
#include "training/runtime.h"

namespace vt::training {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string env_var(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// --- ATen's CPU level ------------------------------------------------------------------------

int level_rank(const std::string& level) {
  const auto& levels = cpu_capability_levels();
  auto it = std::find(levels.begin(), levels.end(), level);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

// The highest level this CPU runs: ATen's avx512 kernels are built for AVX-512 F/BW/VL/DQ with
// FMA, its avx2 kernels for AVX2 with FMA.
std::string cpu_max_level() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "avx512";
  if (fma && __builtin_cpu_supports("avx2")) return "avx2";
#endif
  return "default";
}

// The highest level this verifier may replay at: its CPU's, or lower where its own
// ATEN_CPU_CAPABILITY says so.
std::string allowed_max_level() {
  std::string max = cpu_max_level();
  const std::string cap = lower(env_var("ATEN_CPU_CAPABILITY"));
  if (level_rank(cap) >= 0 && level_rank(cap) < level_rank(max)) max = cap;
  return max;
}

// --- oneDNN ----------------------------------------------------------------------------------

// oneDNN's ISA values are bit masks: an ISA includes another when it holds all of its bits.
using IsaToText = const char* (*)(int);
using IsaGet = int (*)();
using IsaSet = int (*)(int);
constexpr int kOneDnnIsas[] = {0x1, 0x3, 0x7, 0x407, 0xf, 0x1f, 0x27, 0x67, 0xe7, 0x3e7};

struct OneDnn {
  IsaToText to_text = nullptr;
  IsaGet effective = nullptr;
  IsaSet set_max = nullptr;
  bool loaded() const { return to_text && effective && set_max; }

  std::string name(int isa) const {
    std::string text = to_text(isa);
    constexpr std::string_view kPrefix = "cpu_isa_";
    return text.rfind(kPrefix, 0) == 0 ? text.substr(kPrefix.size()) : text;
  }
  int value(const std::string& name_wanted) const {
    for (int isa : kOneDnnIsas) {
      if (name(isa) == name_wanted) return isa;
    }
    return -1;
  }
};

OneDnn onednn() {
  OneDnn d;
  d.to_text = reinterpret_cast<IsaToText>(::dlsym(RTLD_DEFAULT, "dnnl_cpu_isa2str"));
  d.effective = reinterpret_cast<IsaGet>(::dlsym(RTLD_DEFAULT, "dnnl_get_effective_cpu_isa"));
  d.set_max = reinterpret_cast<IsaSet>(::dlsym(RTLD_DEFAULT, "dnnl_set_max_cpu_isa"));
  return d;
}

// oneDNN's own cap from the environment (ONEDNN_MAX_CPU_ISA, or its older DNNL_ name); -1: none.
int onednn_env_cap(const OneDnn& d) {
  std::string cap = env_var("ONEDNN_MAX_CPU_ISA");
  if (cap.empty()) cap = env_var("DNNL_MAX_CPU_ISA");
  if (cap.empty() || lower(cap) == "all") return -1;
  return d.value(lower(cap));
}

// --- BLAS ------------------------------------------------------------------------------------

struct Blas {
  std::string path, sha256;
};

int find_blas(struct dl_phdr_info* info, size_t, void* out) {
  const std::string name = info->dlpi_name == nullptr ? "" : info->dlpi_name;
  const std::string file = name.substr(name.find_last_of('/') + 1);
  if (file.find("blas") != std::string::npos || file.find("mkl_rt") != std::string::npos) {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
  }
  return 0;
}

// The BLAS library this process loaded (through Debian's alternatives symlinks), hashed once.
Blas loaded_blas() {
  static std::once_flag once;
  static Blas blas;
  std::call_once(once, [] {
    std::vector<std::string> names;
    ::dl_iterate_phdr(find_blas, &names);
    if (names.empty()) {
      blas = {"none loaded", "none"};
      return;
    }
    std::error_code ec;
    const auto real = std::filesystem::canonical(names.front(), ec);
    blas.path = ec ? names.front() : real.string();
    auto digest = sha256_file(blas.path);
    blas.sha256 = digest ? hex_encode(*digest) : "unreadable";
  });
  return blas;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

// --- CUDA, by the C entry points of the libraries LibTorch loaded ----------------------------

template <typename Fn>
Fn cuda_symbol(const char* name) {
  if (void* symbol = ::dlsym(RTLD_DEFAULT, name)) return reinterpret_cast<Fn>(symbol);
  // The driver API (cuDeviceGetName, cuDriverGetVersion) is in libcuda, which the CUDA runtime
  // opens with RTLD_LOCAL: on an H200 with LibTorch 2.11 it was not in the global scope, and the
  // log committed gpu_name "unknown". Ask the library itself, only if it is already loaded (the
  // runtime's calls above load it; not cached, so a call before that finds it later).
  void* const driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  return driver != nullptr ? reinterpret_cast<Fn>(::dlsym(driver, name)) : nullptr;
}

std::string version_text(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

constexpr const char* kCudaFields[] = {
    "gpu_name", "compute_capability", "sm_count", "cuda_runtime", "cublas", "cudnn", "cuda_driver"};

void add_cuda_fields(const std::string& device, Environment& env) {
  if (!runtime_info().cuda_available) {
    // A verifier without CUDA measures a CUDA task's environment to say why it cannot replay:
    // "none here" says that, where "unknown" would suggest a reading that failed.
    for (const char* field : kCudaFields) env[field] = "none";
    return;
  }
  const int index = device.size() > 5 ? std::atoi(device.c_str() + 5) : 0;
  using Attribute = int (*)(int*, int, int);
  using IntOut = int (*)(int*);
  using GetName = int (*)(char*, int, int);
  using Property = int (*)(int, int*);
  using SizeVersion = std::size_t (*)();
  // cudaDevAttrMultiProcessorCount, ...ComputeCapabilityMajor, ...Minor (CUDA's stable values).
  constexpr int kSmCount = 16, kMajor = 75, kMinor = 76;
  int value = 0, major = 0, minor = 0;
  if (auto attribute = cuda_symbol<Attribute>("cudaDeviceGetAttribute")) {
    if (attribute(&major, kMajor, index) == 0 && attribute(&minor, kMinor, index) == 0)
      env["compute_capability"] = std::to_string(major) + "." + std::to_string(minor);
    if (attribute(&value, kSmCount, index) == 0) env["sm_count"] = std::to_string(value);
  }
  if (auto get_name = cuda_symbol<GetName>("cuDeviceGetName")) {
    char name[256] = {};
    if (get_name(name, sizeof name - 1, index) == 0) env["gpu_name"] = name;
  }
  if (auto runtime = cuda_symbol<IntOut>("cudaRuntimeGetVersion"); runtime && runtime(&value) == 0)
    env["cuda_runtime"] = version_text(value);
  if (auto driver = cuda_symbol<IntOut>("cuDriverGetVersion"); driver && driver(&value) == 0)
    env["cuda_driver"] = version_text(value);
  if (auto property = cuda_symbol<Property>("cublasGetProperty")) {
    int p[3] = {};
    if (property(0, &p[0]) == 0 && property(1, &p[1]) == 0 && property(2, &p[2]) == 0)
      env["cublas"] =
          std::to_string(p[0]) + "." + std::to_string(p[1]) + "." + std::to_string(p[2]);
  }
  if (auto cudnn = cuda_symbol<SizeVersion>("cudnnGetVersion"))
    env["cudnn"] = std::to_string(cudnn());
  for (const char* field : kCudaFields) env.emplace(field, "unknown");
}

}  // namespace

const std::vector<std::string>& cpu_capability_levels() {
  static const std::vector<std::string> kLevels = {"default", "avx2", "avx512"};
  return kLevels;
}

Environment measure_environment(const Task& task, const TrainerOptions& options) {
  Environment env;
  const std::string device = run_device(task, options);
  const bool cuda = device.rfind("cuda", 0) == 0;
  env["arithmetic"] = name_of(task.determinism);
  env["device"] = cuda ? "cuda" : "cpu";
  env["torch"] = runtime_info().torch_version;
  env["intra_op_threads"] = std::to_string(run_threads(task, options));
  env["cpu_capability"] = aten_cpu_capability();
  const OneDnn d = onednn();
  env["onednn_isa"] = d.loaded() ? d.name(d.effective()) : "not loaded";
  const Blas blas = loaded_blas();
  env["blas_path"] = blas.path;
  env["blas_sha256"] = blas.sha256;
  env["cpu_model"] = cpu_model();
  if (task.determinism == Determinism::kPortable)
    env["kernels"] = kernels::isa_name(kernels::isa());
  env["libtorch_repairs"] = kLibTorchRepairs;
  if (task.model.torchscript()) env["script_executor"] = kScriptExecutor;
  if (cuda) {
    add_cuda_fields(device, env);
    env["tf32"] = task.precision == Precision::kFp32 ? "off" : "on";
  }
  return env;
}

Result<EnvironmentMatch> match_environment(const Environment& committed, const Task& task,
                                           const TrainerOptions& options) {
  EnvironmentMatch match;
  auto field = [&](const char* name) {
    auto it = committed.find(name);
    return it == committed.end() ? std::string() : it->second;
  };
  const std::string native = cpu_max_level();
  const std::string allowed = allowed_max_level();
  const std::string level = field("cpu_capability");
  bool adopted_level = false;
  if (task.determinism == Determinism::kExact && task.device == Device::kCpu) {
    if (level_rank(level) >= 0 && level_rank(level) <= level_rank(allowed)) {
      ::setenv("ATEN_CPU_CAPABILITY", level.c_str(), 1);
      adopted_level = level != native;
    }
    const OneDnn d = onednn();
    const int want = d.loaded() ? d.value(field("onednn_isa")) : -1;
    const int cap = d.loaded() ? onednn_env_cap(d) : -1;
    if (want >= 0 && (cap < 0 || (want & cap) == want)) {
      d.set_max(want);
      // The replays this verifier starts in child processes take the same cap when oneDNN
      // starts there: a second replay that ran another ISA would differ from the first.
      std::string name = d.name(want);
      for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      ::setenv("ONEDNN_MAX_CPU_ISA", name.c_str(), 1);
    }
  }
  match.here = measure_environment(task, options);
  if (adopted_level && match.here.at("cpu_capability") != level) {
    return internal_error("ATen's CPU level was fixed before the committed environment was read (" +
                          match.here.at("cpu_capability") + ", wanted " + level + ")");
  }
  for (EnvironmentDifference& d : condition_differences(committed, match.here, task)) {
    if (d.field == "cpu_capability" && level_rank(d.committed) > level_rank(allowed)) {
      d.here = allowed + (allowed == native ? " (this CPU's highest level)"
                                            : " (the highest ATEN_CPU_CAPABILITY allows here)");
    }
    match.unmatched.push_back(std::move(d));
  }
  // A portable replay needs the task's edition of the arithmetic; another one's bits are no
  // judgement of the provider.
  if (task.determinism == Determinism::kPortable &&
      task.portable_arithmetic != kernels::kPortableArithmetic) {
    match.unmatched.push_back({"portable_arithmetic", std::to_string(task.portable_arithmetic),
                               std::to_string(kernels::kPortableArithmetic)});
  }
  if (match.unmatched.empty() && adopted_level) {
    // Said as a fact about the run, not the machines: provider and verifier may be one machine
    // whose LibTorch picks a lower level than its CPU has.
    match.note = "replayed at ATen CPU level " + level +
                 ", the level the provider committed (this CPU supports up to " + native + ")";
  }
  return match;
}

std::map<std::string, std::vector<std::string>> replayable_environments(
    const Task& task, const TrainerOptions& options) {
  std::map<std::string, std::vector<std::string>> out;
  if (task.determinism != Determinism::kExact || task.device != Device::kCpu) return out;
  const auto& levels = cpu_capability_levels();
  const int max = level_rank(allowed_max_level());
  for (int i = 0; i <= max; ++i)
    out["cpu_capability"].push_back(levels[static_cast<std::size_t>(i)]);
  const OneDnn d = onednn();
  if (d.loaded()) {
    const int top = d.effective();
    for (int isa : kOneDnnIsas) {
      if ((isa & top) == isa) out["onednn_isa"].push_back(d.name(isa));
    }
  }
  out["torch"] = {runtime_info().torch_version};
  out["blas_sha256"] = {loaded_blas().sha256};
  out["intra_op_threads"] = {std::to_string(run_threads(task, options))};
  out["libtorch_repairs"] = {kLibTorchRepairs};
  if (task.model.torchscript()) out["script_executor"] = {kScriptExecutor};
  return out;
}

}  // namespace vt::training
