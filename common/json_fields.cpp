#include "common/json_fields.h"

#include <cmath>
#include <limits>

namespace vt {
namespace {

using nlohmann::json;

std::string kind_of(const json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  return json_excerpt(value);
}

bool fits_int64(const json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() &&
           v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()));
}

}  // namespace

std::string json_excerpt(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

JsonFields::JsonFields(const json& object, std::string where, std::string path, std::string top)
    : object_(object), where_(std::move(where)), path_(std::move(path)), top_(std::move(top)) {}

std::string JsonFields::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Error JsonFields::wrong(std::string_view key, std::string_view expected, const json& got) const {
  return invalid_input(where_ + ": " + path_of(key) + ": expected " + std::string(expected) +
                       ", got " + kind_of(got));
}

Error JsonFields::missing(std::string_view key, std::string_view expected) const {
  return invalid_input(where_ + ": " + path_of(key) + ": missing; expected " +
                       std::string(expected) + " (this field is required)");
}

Error JsonFields::problem(std::string_view key, std::string_view text) const {
  return invalid_input(where_ + ": " + path_of(key) + ": " + std::string(text));
}

Status JsonFields::known_keys(std::initializer_list<std::string_view> known) const {
  if (!object_.is_object()) return {};
  for (const auto& [key, _] : object_.items()) {
    bool found = false;
    for (auto k : known) found = found || k == key;
    if (found) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return invalid_input(where_ + ": " + path_of(key) + ": unknown field (" +
                         (path_.empty() ? top_ : path_) + " has: " + list + ")");
  }
  return {};
}

Result<const json*> JsonFields::find(std::string_view key, bool required,
                                     std::string_view expected) const {
  if (object_.is_object()) {
    auto it = object_.find(key);
    if (it != object_.end()) return &*it;
  }
  if (!required) return static_cast<const json*>(nullptr);
  return missing(key, expected);
}

Result<JsonFields> JsonFields::child(std::string_view key, bool required) const {
  static const json kEmpty = json::object();
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "an object"));
  if (v == nullptr) return JsonFields(kEmpty, where_, path_of(key), top_);
  if (!v->is_object()) return wrong(key, "an object", *v);
  return JsonFields(*v, where_, path_of(key), top_);
}

Status JsonFields::integer(std::string_view key, std::int64_t& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "an integer"));
  if (v == nullptr) return {};
  if (!fits_int64(*v)) return wrong(key, "a 64-bit integer", *v);
  out = v->get<std::int64_t>();
  return {};
}

Status JsonFields::unsigned64(std::string_view key, std::uint64_t& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "an unsigned integer"));
  if (v == nullptr) return {};
  // nlohmann keeps the integers it parsed unsigned when they are non-negative, and those built
  // in memory signed: both kinds are read.
  const bool non_negative =
      v->is_number_unsigned() || (v->is_number_integer() && v->get<std::int64_t>() >= 0);
  if (!non_negative) return wrong(key, "an integer in [0, 2^64 - 1]", *v);
  out = v->get<std::uint64_t>();
  return {};
}

Status JsonFields::number(std::string_view key, double& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "a number"));
  if (v == nullptr) return {};
  if (!v->is_number()) return wrong(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) return wrong(key, "a finite number", *v);
  out = d == 0.0 ? 0.0 : d;  // -0 and 0 are one value; only one may reach a canonical form
  return {};
}

Status JsonFields::number_or_null(std::string_view key, double& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "a number or null"));
  if (v == nullptr) return {};
  if (v->is_null() || *v == "nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return {};
  }
  if (*v == "inf" || *v == "-inf") {
    out = *v == "inf" ? std::numeric_limits<double>::infinity()
                      : -std::numeric_limits<double>::infinity();
    return {};
  }
  if (!v->is_number()) return wrong(key, "a number or null", *v);
  out = v->get<double>();
  return {};
}

Status JsonFields::boolean(std::string_view key, bool& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "true or false"));
  if (v == nullptr) return {};
  if (!v->is_boolean()) return wrong(key, "true or false", *v);
  out = v->get<bool>();
  return {};
}

Status JsonFields::string(std::string_view key, std::string& out, bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "a string"));
  if (v == nullptr) return {};
  if (!v->is_string()) return wrong(key, "a string", *v);
  out = v->get<std::string>();
  return {};
}

Status JsonFields::number_or_none(std::string_view key, std::optional<double>& out) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, true, "a number or null"));
  if (v->is_null()) {
    out.reset();
    return {};
  }
  double d = 0.0;
  VT_RETURN_IF_ERROR(number(key, d, true));
  out = d;
  return {};
}

Status JsonFields::optional_string(std::string_view key, std::optional<std::string>& out) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, false, "a string"));
  if (v == nullptr || v->is_null()) {
    out.reset();
    return {};
  }
  if (!v->is_string()) return wrong(key, "a string", *v);
  out = v->get<std::string>();
  return {};
}

Status JsonFields::strings(std::string_view key, std::vector<std::string>& out,
                           bool required) const {
  VT_ASSIGN_OR_RETURN(const json* v, find(key, required, "an array of strings"));
  if (v == nullptr) return {};
  if (!v->is_array()) return wrong(key, "an array of strings", *v);
  std::vector<std::string> items;
  for (const json& item : *v) {
    if (!item.is_string()) return wrong(key, "an array of strings", *v);
    items.push_back(item.get<std::string>());
  }
  out = std::move(items);
  return {};
}

Status JsonFields::integer_map(std::string_view key,
                               std::map<std::string, std::int64_t>& out) const {
  VT_ASSIGN_OR_RETURN(JsonFields map, child(key, false));
  for (const auto& [name, v] : map.object_.items()) {
    if (!fits_int64(v)) return map.wrong(name, "a 64-bit integer", v);
    out[name] = v.get<std::int64_t>();
  }
  return {};
}

Status JsonFields::string_map(std::string_view key, std::map<std::string, std::string>& out) const {
  VT_ASSIGN_OR_RETURN(JsonFields map, child(key, false));
  for (const auto& [name, v] : map.object_.items()) {
    if (!v.is_string()) return map.wrong(name, "a string", v);
    out[name] = v.get<std::string>();
  }
  return {};
}

Status JsonFields::string_lists(std::string_view key,
                                std::map<std::string, std::vector<std::string>>& out) const {
  VT_ASSIGN_OR_RETURN(JsonFields map, child(key, false));
  for (const auto& [name, v] : map.object_.items()) {
    VT_RETURN_IF_ERROR(map.strings(name, out[name], true));
  }
  return {};
}

}  // namespace vt
