#pragma once
// `task init` flags for the data a task reads from files (docs/datasets.md): kept apart from
// cmd_task.cpp so that the dataset flags and their pinning live in one place.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "protocol/task.h"

namespace vt::cli {

struct DataFlags {
  std::vector<std::string> data_files, eval_files;
  double eval_fraction = -1;
  std::int64_t context = -1;
  std::string token_dtype;
};

void add_data_flags(CLI::App* init, DataFlags& flags);

// Pins --data-file / --eval-file by SHA-256 (all in one folder, which becomes dataset.path) and
// sets eval_fraction, context and token_bits from their flags.
Status apply_data_flags(const DataFlags& flags, Task& task);

// The model options a built-in model takes from its data, read from the pinned training files
// unless `given` (the names passed with --option) holds them: an mlp's input_dim and classes, a
// cnn's classes, a gpt's vocab. Returns "input_dim = 64, classes = 10" for what it filled ("" for
// nothing): `task init` says so.
Result<std::string> fill_model_options_from_data(Task& task, const std::vector<std::string>& given);

}  // namespace vt::cli
