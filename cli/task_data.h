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

}  // namespace vt::cli
