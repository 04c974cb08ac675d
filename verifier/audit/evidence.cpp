#include "verifier/audit/evidence.h"

#include "common/json.h"

namespace vt::verifier {
namespace {

constexpr const char* kEvidenceFormat = "veritrain.evidence.v1";

Result<AuditFinding> finding_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_input("evidence: finding is not an object");
  AuditFinding f;
  try {
    f.epoch = j.at("epoch").get<std::uint64_t>();
    VT_ASSIGN_OR_RETURN(f.committed_root, digest_from_hex(j.at("committed_root").get<std::string>(),
                                                          "committed_root"));
    VT_ASSIGN_OR_RETURN(f.replay_root,
                        digest_from_hex(j.at("replay_root").get<std::string>(), "replay_root"));
    f.bit_identical = j.at("bit_identical").get<bool>();
    f.within_tolerance = j.at("within_tolerance").get<bool>();
    if (!j.at("first_diverging_step").is_null())
      f.first_diverging_step = j.at("first_diverging_step").get<std::int64_t>();
    if (!j.at("last_matching_step").is_null())
      f.last_matching_step = j.at("last_matching_step").get<std::int64_t>();
    if (j.contains("stored_state_problem"))
      f.stored_state_problem = j.at("stored_state_problem").get<std::string>();
    if (j.contains("start_state_problem"))
      f.start_state_problem = j.at("start_state_problem").get<std::string>();
    for (const auto& d : j.at("differences")) {
      f.differences.push_back({d.at("tensor").get<std::string>(),
                               d.at("differing").get<std::uint64_t>(),
                               d.at("sampled").get<std::uint64_t>(),
                               d.at("positions").get<std::vector<std::uint64_t>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_input(std::string("evidence: finding: ") + e.what());
  }
  return f;
}

}  // namespace

nlohmann::json finding_to_json(const AuditFinding& f) {
  nlohmann::json diffs = nlohmann::json::array();
  for (const auto& d : f.differences) {
    diffs.push_back({{"tensor", d.tensor},
                     {"differing", d.differing},
                     {"sampled", d.sampled},
                     {"positions", d.positions}});
  }
  auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json j = {{"epoch", f.epoch},
                      {"committed_root", hex_encode(f.committed_root)},
                      {"replay_root", hex_encode(f.replay_root)},
                      {"bit_identical", f.bit_identical},
                      {"within_tolerance", f.within_tolerance},
                      {"steps", f.steps},
                      {"trail_interval", f.trail_interval},
                      {"last_matching_step", opt(f.last_matching_step)},
                      {"first_diverging_step", opt(f.first_diverging_step)},
                      {"differences", diffs},
                      {"summary", f.summary}};
  if (!f.second_opinion.is_null()) j["second_opinion"] = f.second_opinion;
  // Written only when there is one, so evidence about a sound stored state keeps its old form.
  if (!f.stored_state_problem.empty()) j["stored_state_problem"] = f.stored_state_problem;
  if (!f.start_state_problem.empty()) j["start_state_problem"] = f.start_state_problem;
  return j;
}

Result<std::string> make_evidence(const AuditFinding& finding, const Task& task,
                                  const SignedRecord& before, const SignedRecord& after,
                                  const SigningKey& auditor) {
  const Bytes before_line = encode_record(before);
  const Bytes after_line = encode_record(after);
  VT_ASSIGN_OR_RETURN(PublicKey provider, PublicKey::from_raw(after.record.signer));
  // Both keys inside the signed body: who signed the records, and who signed this judgement.
  nlohmann::json evidence = {{"format", kEvidenceFormat},
                             {"provider", {{"key", provider.fingerprint()}}},
                             {"auditor", {{"key", auditor.public_key().fingerprint()}}},
                             {"task_id", hex_encode(task_id(task))},
                             {"finding", finding_to_json(finding)},
                             {"provider_records",
                              {std::string(before_line.begin(), before_line.end()),
                               std::string(after_line.begin(), after_line.end())}},
                             {"time", utc_now_iso8601()}};
  const std::string body = canonical_json(evidence);
  nlohmann::json doc = {{"evidence", evidence},
                        {"signature", hex_encode(auditor.sign(as_bytes(body)))},
                        {"signer", hex_encode(auditor.public_key().raw())}};
  return doc.dump(2) + "\n";
}

Result<SignedEvidence> read_evidence(const std::string& evidence_json, const Task& task) {
  VT_ASSIGN_OR_RETURN(nlohmann::json doc, parse_json(evidence_json, "evidence"));
  if (!doc.is_object() || !doc.contains("evidence") || !doc.contains("signature") ||
      !doc.contains("signer") || !doc["signature"].is_string() || !doc["signer"].is_string()) {
    return invalid_input("evidence: expected an object with evidence, signature and signer");
  }
  const nlohmann::json& evidence = doc["evidence"];
  VT_ASSIGN_OR_RETURN(Bytes signer_raw, hex_decode(doc["signer"].get<std::string>()));
  VT_ASSIGN_OR_RETURN(PublicKey signer, PublicKey::from_raw(signer_raw));
  VT_ASSIGN_OR_RETURN(Bytes signature, hex_decode(doc["signature"].get<std::string>()));
  if (!signer.verify(as_bytes(canonical_json(evidence)), signature)) {
    return rejected(
        "evidence: the auditor's signature does not cover this content (edited after signing?)");
  }
  // Signed is not the same as well-formed: check the shape before reading it.
  if (!evidence.is_object() || !evidence.contains("format") || !evidence["format"].is_string() ||
      !evidence.contains("task_id") || !evidence["task_id"].is_string() ||
      !evidence.contains("finding") || !evidence.contains("provider_records")) {
    return invalid_input("evidence: expected format, task_id, finding and provider_records");
  }
  if (evidence["format"] != kEvidenceFormat) return invalid_input("evidence: unknown format");
  if (evidence["task_id"] != hex_encode(task_id(task))) {
    return rejected("evidence: it is about task " + evidence["task_id"].get<std::string>() +
                    ", not this task");
  }
  // The provider's own signed commitments are inside: they must verify under their signer key.
  const auto& lines = evidence["provider_records"];
  if (!lines.is_array() || lines.size() != 2)
    return invalid_input("evidence: provider_records must hold two records");
  for (const auto& line : lines) {
    if (!line.is_string()) return invalid_input("evidence: a provider record is not a string");
    const std::string text = line.get<std::string>();
    VT_ASSIGN_OR_RETURN(SignedRecord r, decode_record(as_bytes(text), "evidence provider record"));
    VT_ASSIGN_OR_RETURN(PublicKey provider, PublicKey::from_raw(r.record.signer));
    if (!provider.verify(as_bytes(r.body), r.signature))
      return rejected("evidence: a provider record's signature is invalid");
  }
  SignedEvidence out;
  out.auditor_fingerprint = signer.fingerprint();
  VT_ASSIGN_OR_RETURN(out.claimed, finding_from_json(evidence["finding"]));
  return out;
}

}  // namespace vt::verifier
