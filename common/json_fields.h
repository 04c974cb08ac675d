#pragma once
// Reading the fields of one JSON object, for every format that has any (the task, log records,
// wire headers, the verifier's saved state), with one error style that names the document, the
// field's path and what was expected:
//
//   task.json: optimizer.lr: expected a number, got "fast"
//   task.json: epochs: missing; expected an integer (this field is required)
//   task.json: optimiser: unknown field (the task has: batch_size, dataset, ...)
//
// Values quoted back are cut short, so a hostile document cannot make an error message large.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace vt {

class JsonFields {
 public:
  // `where` names the document ("task.json", "log.jsonl: epoch 3"); `path` the object's place
  // in it ("" for the top level, "optimizer", "metrics.eval"); `top` what an unknown-field
  // error calls the top level ("the task").
  JsonFields(const nlohmann::json& object, std::string where, std::string path = "",
             std::string top = "the document");

  const nlohmann::json& value() const { return object_; }
  // "optimizer.lr": the path errors name for `key`.
  std::string path_of(std::string_view key) const;

  Error wrong(std::string_view key, std::string_view expected, const nlohmann::json& got) const;
  Error missing(std::string_view key, std::string_view expected) const;
  // "<where>: <path.key>: <text>" for rules beyond a field's type.
  Error problem(std::string_view key, std::string_view text) const;

  // Unknown fields are errors: a misspelt "learning_rate" would otherwise silently mean the
  // default. The message lists the known names.
  Status known_keys(std::initializer_list<std::string_view> known) const;

  // The field, or nullptr when it is absent and not required (an error when required).
  Result<const nlohmann::json*> find(std::string_view key, bool required,
                                     std::string_view expected) const;
  // An object field; an absent optional one reads as {}.
  Result<JsonFields> child(std::string_view key, bool required) const;

  // Each leaves `out` as it was when the field is absent and not required.
  Status integer(std::string_view key, std::int64_t& out, bool required = false) const;
  Status unsigned64(std::string_view key, std::uint64_t& out, bool required = false) const;
  // A finite number; -0 reads as 0.
  Status number(std::string_view key, double& out, bool required = false) const;
  // A number, or null for a value that was not finite (read as NaN).
  Status number_or_null(std::string_view key, double& out, bool required = false) const;
  Status boolean(std::string_view key, bool& out, bool required = false) const;
  Status string(std::string_view key, std::string& out, bool required = false) const;
  Status optional_string(std::string_view key, std::optional<std::string>& out) const;
  // A required field holding a finite number, or null for none.
  Status number_or_none(std::string_view key, std::optional<double>& out) const;
  Status strings(std::string_view key, std::vector<std::string>& out, bool required = false) const;
  // An object of integers / strings / arrays of strings.
  Status integer_map(std::string_view key, std::map<std::string, std::int64_t>& out) const;
  Status string_map(std::string_view key, std::map<std::string, std::string>& out) const;
  Status string_lists(std::string_view key,
                      std::map<std::string, std::vector<std::string>>& out) const;

 private:
  const nlohmann::json& object_;
  std::string where_;
  std::string path_;
  std::string top_;
};

// A JSON value quoted in an error: at most 60 characters.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace vt
