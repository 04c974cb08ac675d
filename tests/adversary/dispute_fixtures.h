#pragma once
// What the operator dispute tests share: the small portable tasks they trace, a gpt (dropout,
// GELU, softmax, layer norm, AdamW with weight decay) and a cnn (convolutions, batch norm), a step
// of each small enough to trace every call in a test; and the numpy referee they rule with.

#include <filesystem>
#include <string>
#include <vector>

#include "protocol/task.h"
#include "tests/test_util.h"
#include "training/zoo/zoo.h"

namespace vt::adversary {

inline Task small_gpt() {
  Task t = *training::default_task("gpt", "synthetic");
  t.model.options = {
      {"vocab", 16},    {"d_model", 16},          {"layers", 1}, {"heads", 2}, {"seq_len", 8},
      {"mlp_ratio", 2}, {"dropout_permille", 100}};
  t.dataset.options = {{"samples", 32}};
  t.optimizer.weight_decay = 0.01;
  t.epochs = 1;
  t.steps_per_epoch = 2;
  t.batch_size = 4;
  t.determinism = Determinism::kPortable;
  return t;
}

inline Task small_cnn() {
  Task t = *training::default_task("cnn", "synthetic");
  t.model.options = {{"width", 4}, {"blocks", 1}, {"classes", 10}};
  t.dataset.options = {{"samples", 16}};
  t.epochs = 1;
  t.steps_per_epoch = 2;
  t.batch_size = 4;
  t.determinism = Determinism::kPortable;
  return t;
}

// `task` with docs/task.md's recipes on, the clipping binding: the operators they add
// (sum_of_squares or abs_max, clip_coefficient, scale_gradient, the smoothed cross-entropy) are in
// every step.
inline Task with_recipes(Task t, bool inf_norm = false) {
  t.optimizer.weight_decay = 0.01;
  t.optimizer.clip_grad_norm = 0.01;
  t.optimizer.clip_norm = inf_norm ? "inf" : "l2";
  t.optimizer.no_decay = t.model.name == "gpt"
                             ? std::vector<std::string>{"ln_f.bias", "ln_f.weight"}
                             : std::vector<std::string>{"head.bias"};
  t.loss_options.label_smoothing = 0.1;
  t.optimizer.ema_decay = 0.9;
  return t;
}

// reference/referee_ref.py (numpy alone) on an evidence file.
inline testing::CommandResult numpy_referee(const std::filesystem::path& evidence,
                                            const std::filesystem::path& scratch) {
  return testing::run_command("/usr/bin/python3 " + std::string(VT_SOURCE_DIR) +
                                  "/reference/referee_ref.py " + evidence.string(),
                              scratch);
}

}  // namespace vt::adversary
