#pragma once
// A workdir as `log verify` and `inspect` describe it: provider::check_workdir's report as JSON
// and as text for people.

#include <string>

#include <nlohmann/json.hpp>

#include "provider/check.h"

namespace vt::cli {

nlohmann::json report_json(const provider::WorkdirReport& r);
std::string report_text(const provider::WorkdirReport& r);

}  // namespace vt::cli
