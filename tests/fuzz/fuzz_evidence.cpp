// libFuzzer target for the evidence reader (verifier/audit/evidence.h, read_evidence: everything
// `audit --check` does before it re-runs the audit): any text is read as a finding, or refused
// as malformed input or as a rejection (an edit after signing), never a crash, an exception or
// an internal error. The auditor's signature and the task id gate everything after them, so
// each input is also tried about this task and re-signed with a fixed key: that is how an
// auditor's own malformed file looks to a checker, and how mutations reach the provider
// records and the finding.

#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "verifier/audit/evidence.h"

namespace {

const vt::SigningKey& auditor() {
  static const vt::SigningKey key = *vt::SigningKey::generate();
  return key;
}

vt::Task fuzz_task() {
  vt::Task t;
  t.model.name = "mlp";
  t.dataset.name = "synthetic";
  return t;
}

void read(const std::string& text, const vt::Task& task) {
  auto r = vt::verifier::read_evidence(text, task);
  if (!r.ok() && r.error().code != vt::Errc::kInvalidInput &&
      r.error().code != vt::Errc::kRejected) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const vt::Task task = fuzz_task();
  const std::string text(reinterpret_cast<const char*>(data), size);
  read(text, task);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("evidence")) return 0;
  if (doc["evidence"].is_object()) doc["evidence"]["task_id"] = vt::hex_encode(vt::task_id(task));
  doc["signature"] =
      vt::hex_encode(auditor().sign(vt::as_bytes(vt::canonical_json(doc["evidence"]))));
  doc["signer"] = vt::hex_encode(auditor().public_key().raw());
  read(doc.dump(), task);
  return 0;
}
