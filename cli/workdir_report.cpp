#include "cli/workdir_report.h"

#include <sstream>

#include "common/text.h"

namespace vt::cli {

nlohmann::json report_json(const provider::WorkdirReport& r) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : r.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"root", hex_encode(e.root)},
                      {"file", e.file},
                      {"codec", e.codec},
                      {"stored_bytes", e.stored_bytes}});
    if (!e.problem.empty()) epochs.back()["problem"] = e.problem;
  }
  nlohmann::json j = {{"task_id", hex_encode(r.task_id)}, {"records", r.records},
                      {"head", hex_encode(r.head)},       {"signer", r.signer_fingerprint},
                      {"disk_bytes", r.disk_bytes},       {"epochs", epochs}};
  if (!r.torn_tail.empty()) j["torn_tail"] = r.torn_tail;
  return j;
}

std::string report_text(const provider::WorkdirReport& r) {
  std::ostringstream out;
  out << "task_id " << hex_encode(r.task_id) << "\n"
      << r.records << " commitments, signer " << r.signer_fingerprint.substr(0, 16) << "..., head "
      << hex_encode(r.head).substr(0, 16) << "...\n";
  for (const auto& e : r.epochs) {
    out << "  epoch " << e.epoch << "  root " << hex_encode(e.root).substr(0, 16) << "...  "
        << e.codec << "  " << size_text(static_cast<double>(e.stored_bytes)) << "  " << e.file
        << (e.problem.empty() ? "" : "  UNUSABLE: " + e.problem) << "\n";
  }
  out << "stored " << size_text(static_cast<double>(r.disk_bytes)) << "\n";
  if (!r.torn_tail.empty()) out << "note: " << r.torn_tail << "\n";
  return out.str();
}

}  // namespace vt::cli
