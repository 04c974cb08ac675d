#include "cli/task_data.h"

#include <algorithm>
#include <filesystem>

#include "common/mapped_file.h"
#include "training/data/mapped_data.h"

namespace vt::cli {
namespace {

namespace fs = std::filesystem;

// Pins `files` into `into`; every file must lie in `folder` (set from the first when empty).
Status pin(const std::vector<std::string>& files, std::map<std::string, std::string>& into,
           std::string& folder, const std::string& flag) {
  for (const std::string& f : files) {
    const fs::path p(f);
    const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
    if (folder.empty()) folder = parent;
    if (parent != folder) {
      return invalid_input(flag + " " + f + ": every data file must lie in one folder (" + folder +
                           "), which becomes dataset.path");
    }
    VT_ASSIGN_OR_RETURN(Digest d, sha256_file(p));
    into[p.filename().string()] = hex_encode(d);
  }
  return {};
}

}  // namespace

void add_data_flags(CLI::App* init, DataFlags& f) {
  init->add_option("--data-file", f.data_files,
                   "A tensors or tokens file to pin by SHA-256 (repeatable; shards in name order)");
  init->add_option("--eval-file", f.eval_files, "A held-out file to pin by SHA-256 (repeatable)");
  init->add_option("--eval-fraction", f.eval_fraction,
                   "Fraction of the examples held out by the PRNG (tensors)");
  init->add_option("--context", f.context, "Tokens per example (tokens; 0 = the gpt's seq_len)");
  init->add_option("--token-dtype", f.token_dtype, "u16 | u32 (tokens files)");
}

Status apply_data_flags(const DataFlags& f, Task& task) {
  std::string folder = task.dataset.path;
  VT_RETURN_IF_ERROR(pin(f.data_files, task.dataset.files, folder, "--data-file"));
  VT_RETURN_IF_ERROR(pin(f.eval_files, task.dataset.eval_files, folder, "--eval-file"));
  if (!f.data_files.empty() || !f.eval_files.empty()) task.dataset.path = folder;
  if (f.eval_fraction >= 0) task.dataset.eval_fraction = f.eval_fraction;
  if (f.context >= 0) task.dataset.options["context"] = f.context;
  if (!f.token_dtype.empty()) {
    if (f.token_dtype != "u16" && f.token_dtype != "u32") {
      return invalid_input("--token-dtype: expected u16 or u32, got \"" + f.token_dtype + "\"");
    }
    task.dataset.options["token_bits"] = f.token_dtype == "u16" ? 16 : 32;
  }
  return {};
}

Result<std::string> fill_model_options_from_data(Task& task,
                                                 const std::vector<std::string>& given) {
  if (task.dataset.files.empty()) return std::string();
  VT_ASSIGN_OR_RETURN(const training::TrainingTask resolved, training::resolve_options(task));
  // A zoo model sized by its classes (or vocabulary) or features takes them from the files of a
  // memory-mapped dataset it trains on.
  const training::ModelRow& m = resolved.zoo_model();
  if (!resolved.zoo_dataset().memory_mapped || !m.trains_on(resolved.zoo_dataset().kind) ||
      (m.class_option.empty() && m.feature_option.empty()))
    return std::string();
  VT_ASSIGN_OR_RETURN(auto data, training::MappedDataset::open(resolved, task.dataset.path,
                                                               task.dataset.files, "train"));
  std::string filled;
  const auto fill = [&](const std::string& name, std::int64_t value) {
    for (const std::string& g : given) {
      if (g.rfind(name + "=", 0) == 0) return;  // the caller's own choice stands
    }
    task.model.options[name] = value;
    filled += (filled.empty() ? "" : ", ") + name + " = " + std::to_string(value);
  };
  if (!m.feature_option.empty() && data->targets().shape.empty()) {
    std::int64_t features = 1;
    for (std::int64_t d : data->inputs().shape) features *= d;
    fill(m.feature_option, features);
  }
  if (const std::optional<std::int64_t> largest = data->largest_class_target();
      !m.class_option.empty() && largest && *largest >= 0 && task.loss == "cross_entropy") {
    fill(m.class_option, std::max<std::int64_t>(2, *largest + 1));
  }
  return filled;
}

}  // namespace vt::cli
