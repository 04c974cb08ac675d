#include "verifier/check/environment_check.h"

#include "common/text.h"

namespace vt::verifier {

Result<std::optional<training::EnvironmentMatch>> adopt_committed_environment(
    EvidenceSource& source, const Task& task, const training::TrainerOptions& trainer, bool online,
    std::chrono::milliseconds wait) {
  std::optional<SignedRecord> first;
  if (online) {
    // A failure to follow (nothing committed in time, a broken stream) is judged by the
    // verification itself; here it only means there is nothing to match yet.
    (void)source.follow(
        0,
        [&](const SignedRecord& r) {
          first = r;
          return false;
        },
        wait);
  } else {
    // Epoch 0's record alone: the rest of the log is read once the task's model bounds it.
    auto head = source.first_record();
    if (!head) {
      if (head.error().code == Errc::kIo) return head.error();
      return std::optional<training::EnvironmentMatch>();
    }
    first = std::move(*head);
  }
  if (!first || first->record.epoch != 0 || !first->record.environment)
    return std::optional<training::EnvironmentMatch>();
  VT_ASSIGN_OR_RETURN(training::EnvironmentMatch match,
                      training::match_environment(*first->record.environment, task, trainer));
  return std::optional<training::EnvironmentMatch>(std::move(match));
}

std::vector<std::string> check_committed_environments(const std::vector<SignedRecord>& records,
                                                      const Task& task) {
  std::vector<std::string> failures;
  if (records.empty()) return failures;
  const std::optional<Environment>& first = records.front().record.environment;
  if (!first) {
    failures.push_back(
        "epoch 0: the record commits no arithmetic environment, so no verifier can tell whether "
        "it replays in the provider's (docs/environment.md)");
  }
  for (const SignedRecord& r : records) {
    if (!r.record.environment) continue;
    const std::string e = "epoch " + std::to_string(r.record.epoch) + ": ";
    for (const std::string& outside : pin_violations(*r.record.environment, task))
      failures.push_back(e + "the committed arithmetic environment is outside the task's pin: " +
                         printable(outside, 200));
    if (!first || r.record.epoch == 0) continue;
    for (const EnvironmentDifference& d :
         condition_differences(*first, *r.record.environment, task))
      failures.push_back(e + "the arithmetic environment changed at a resume: " + d.field + " " +
                         printable(d.committed) + " at epoch 0, " + printable(d.here) +
                         " here; an exact-mode run has one environment");
  }
  return failures;
}

std::string what_would_judge(const std::vector<EnvironmentDifference>& unmatched,
                             const Environment& committed) {
  auto value = [&](const char* field) {
    auto it = committed.find(field);
    return it == committed.end() ? std::string("?") : printable(it->second);
  };
  std::string out;
  auto add = [&](const std::string& s) {
    if (out.find(s) == std::string::npos) out += (out.empty() ? "" : "; ") + s;
  };
  for (const EnvironmentDifference& d : unmatched) {
    if (d.field == "cpu_capability") {
      add("a machine whose CPU runs ATen's " + printable(d.committed) +
          " kernels (and no ATEN_CPU_CAPABILITY below it)");
    } else if (d.field == "onednn_isa") {
      add("a CPU on which oneDNN reaches " + printable(d.committed));
    } else if (d.field == "torch") {
      add("LibTorch " + printable(d.committed));
    } else if (d.field == "blas_sha256") {
      add("the provider's BLAS library (" + value("blas_path") + ", SHA-256 " +
          printable(d.committed, 16) + ")");
    } else if (d.field == "device" || d.field == "gpu_name" || d.field == "compute_capability" ||
               d.field == "sm_count" || d.field == "cuda_runtime" || d.field == "cublas" ||
               d.field == "cudnn" || d.field == "tf32") {
      // A log can commit "unknown" for the GPU's name (the driver's entry points were not
      // found): the capability and SM count still say which GPU.
      const std::string gpu =
          value("gpu_name") == "unknown" ? std::string("GPU") : value("gpu_name") + " GPU";
      add(value("device") == "cuda"
              ? "a " + gpu + " (compute capability " + value("compute_capability") + ", " +
                    value("sm_count") + " SMs) with CUDA " + value("cuda_runtime") + ", cuBLAS " +
                    value("cublas") + " and cuDNN " + value("cudnn")
              : "a CPU replay");
    } else if (d.field == "script_executor") {
      add(d.committed.empty()
              ? "none: the log commits no TorchScript executor, so it was trained by a veritrain "
                "whose TorchScript arithmetic changed after a module's first calls, and the bits "
                "of an epoch depend on how often the module had run before it, which no log "
                "records; train it again with this veritrain"
              : "a veritrain that runs TorchScript as " + printable(d.committed));
    } else if (d.field == "libtorch_repairs") {
      add(d.committed.empty()
              ? "none: the log commits no LibTorch repairs, so it was trained by a veritrain "
                "whose GELU gradients, arriving transposed, were read from memory LibTorch "
                "never wrote (docs/training.md, \"LibTorch's repaired kernels\"); train it "
                "again with this veritrain"
              : "a veritrain that repairs LibTorch's " + printable(d.committed));
    } else if (d.field == "portable_arithmetic") {
      // Already portable: the other mode is no advice here.
      return "a veritrain that implements portable arithmetic " + printable(d.committed) +
             " (docs/portable.md, \"Versions\")";
    } else {
      add(d.field + " " + printable(d.committed));
    }
  }
  return out +
         "; or, for the next task, determinism \"portable\", whose bits depend on the task "
         "alone (docs/portable.md)";
}

}  // namespace vt::verifier
