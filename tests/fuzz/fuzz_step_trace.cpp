// libFuzzer target for what a provider or an auditor hands a dispute (docs/dispute.md): a signed
// step trace, a call's values, operator evidence. Any text is read, or refused as malformed input
// or as a rejection (a signature, proof or hash that does not hold), never a crash, an exception
// or an internal error. The auditor's signature gates the evidence, so each input is also tried
// re-signed with a fixed key, and evidence that reads is ruled on; the evidence's call is also
// recomputed unsigned, so that mutated parameters reach the referee's bounds (every size a call
// names is bounded before the referee allocates).

#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "dispute/recompute.h"
#include "dispute/referee.h"

namespace {

const vt::SigningKey& auditor() {
  static const vt::SigningKey key = *vt::SigningKey::generate();
  return key;
}

template <typename T>
void expect_refused_or_read(const vt::Result<T>& r) {
  if (!r.ok() && r.error().code != vt::Errc::kInvalidInput &&
      r.error().code != vt::Errc::kRejected) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto trace = vt::dispute::read_signed_trace(text, "trace");
  expect_refused_or_read(trace);
  const vt::dispute::TraceHeader header =
      trace.ok() ? trace->trace.header : vt::dispute::TraceHeader{};
  expect_refused_or_read(vt::dispute::read_call_values(text, "values", header));
  expect_refused_or_read(vt::dispute::read_operator_evidence(text, "evidence"));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("evidence")) return 0;
  // The referee's recomputation reached directly with the call and inputs as they stand: the
  // signatures and the proof would otherwise keep every mutated parameter away from it.
  const nlohmann::json& body = doc["evidence"];
  if (body.is_object() && body.contains("call") && body["call"].is_object() &&
      body["call"].contains("index") && body["call"]["index"].is_number_integer() &&
      body.contains("inputs")) {
    auto call = vt::dispute::call_from_json(body["call"], body["call"]["index"].get<std::int64_t>(),
                                            "call");
    auto inputs = vt::dispute::values_from_json(body["inputs"], "inputs");
    if (call.ok() && inputs.ok()) expect_refused_or_read(vt::dispute::recompute(*call, *inputs));
  }
  doc["signature"] =
      vt::hex_encode(auditor().sign(vt::as_bytes(vt::canonical_json(doc["evidence"]))));
  doc["signer"] = vt::hex_encode(auditor().public_key().raw());
  auto evidence = vt::dispute::read_operator_evidence(doc.dump(), "evidence");
  expect_refused_or_read(evidence);
  if (evidence.ok()) expect_refused_or_read(vt::dispute::rule(evidence->evidence));
  return 0;
}
