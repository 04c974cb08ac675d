#pragma once
// The arithmetic environment of a run (docs/environment.md): what the bits of LibTorch's own
// kernels depend on besides the task. The provider commits it in the signed log; in exact mode
// a verifier replays only where it can reproduce every field that is a condition of exactness,
// and otherwise ends inconclusive instead of calling an honest provider a cheat.
//
// An environment is a flat map of named text fields, so that a field added later (another
// library, another device) needs no new format: a reader compares what both sides name.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/task.h"

namespace vt {

using Environment = std::map<std::string, std::string>;

struct EnvironmentField {
  std::string_view name;
  // A condition of exactness for exact-mode tasks on this device class: a replay with another
  // value may give other bits. Every other field is information for people.
  bool cpu_condition = false;
  bool cuda_condition = false;
  std::string_view meaning;
  // Recorded, and a condition, only for tasks whose model is a TorchScript module.
  bool torchscript_only = false;
};

// Every field a provider records, in the order docs/environment.md lists them.
const std::vector<EnvironmentField>& environment_fields();
const EnvironmentField* find_environment_field(std::string_view name);

// Whether `field` must be equal for an exact replay of `task`. Always false in portable mode
// (the bits depend on the task alone) and in tolerance mode (differences are measured).
bool is_exactness_condition(std::string_view field, const Task& task);

// Bounds on what a log record may carry: a provider's fields are text, not a payload.
inline constexpr std::size_t kMaxEnvironmentFields = 64;
inline constexpr std::size_t kMaxEnvironmentValue = 512;

nlohmann::json environment_to_json(const Environment& env);
// An object of at most kMaxEnvironmentFields known-or-unknown names with text values of at most
// kMaxEnvironmentValue bytes; errors name `where` and the field.
Result<Environment> environment_from_json(const nlohmann::json& value, std::string_view where);

struct EnvironmentDifference {
  std::string field;
  std::string committed;  // "" when the field is absent there
  std::string here;       // the other side's value, or why it cannot take the committed one
};

// The condition fields of `task` on which `a` and `b` differ (a field absent on one side
// differs from any value on the other).
std::vector<EnvironmentDifference> condition_differences(const Environment& a, const Environment& b,
                                                         const Task& task);

// The task's `environments` pin is well-formed: known field names, 1-64 values each of 1-512
// bytes. Errors read like validate_task's ("task.json: environments.cpu_capability: ...").
Status validate_environment_pin(const Task& task, std::string_view where);

// What the task's `environments` pin refuses in `committed`: one line per field, naming the
// value and the values the task accepts. Empty when the task pins nothing or all fits.
std::vector<std::string> pin_violations(const Environment& committed, const Task& task);

// What `task check`, `plan` and `task init` tell a requestor before anyone pays, or "": an
// exact-mode task is judged only where the provider's environment can be reproduced, so a task
// that pins none, or pins values this machine cannot replay (`replayable_here`, as
// training::replayable_environments gives it; empty when unknown), is worth a warning.
std::string exact_mode_warning(
    const Task& task, const std::map<std::string, std::vector<std::string>>& replayable_here);

// Which arithmetic a run used, for people, from its `arithmetic` field: "portable: veritrain's
// own kernels, the same bits on any CPU and thread count".
std::string arithmetic_of(const Environment& committed);

}  // namespace vt
