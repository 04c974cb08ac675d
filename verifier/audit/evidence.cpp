#include "verifier/audit/evidence.h"

#include "common/json.h"
#include "common/json_fields.h"

namespace vt::verifier {
namespace {

constexpr const char* kEvidenceFormat = "veritrain.evidence.v1";

// An unsigned integer, or null for "none".
Status optional_step(const JsonFields& r, std::string_view key, std::optional<std::int64_t>& out) {
  VT_ASSIGN_OR_RETURN(const nlohmann::json* v, r.find(key, true, "an integer or null"));
  if (v->is_null()) return {};
  std::int64_t step = 0;
  VT_RETURN_IF_ERROR(r.integer(key, step, true));
  out = step;
  return {};
}

Result<TensorDifference> difference_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return invalid_input("evidence: " + path + ": expected an object");
  const JsonFields r(j, "evidence", path);
  TensorDifference d;
  VT_RETURN_IF_ERROR(r.string("tensor", d.tensor, true));
  VT_RETURN_IF_ERROR(r.unsigned64("differing", d.differing, true));
  VT_RETURN_IF_ERROR(r.unsigned64("sampled", d.sampled, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* positions, r.find("positions", true, "an array"));
  if (!positions->is_array()) return r.wrong("positions", "an array", *positions);
  for (const nlohmann::json& p : *positions) {
    if (!p.is_number_unsigned()) return r.wrong("positions", "an array of unsigned integers", p);
    d.positions.push_back(p.get<std::uint64_t>());
  }
  return d;
}

Result<AuditFinding> finding_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_input("evidence: finding: expected an object");
  const JsonFields r(j, "evidence", "finding");
  AuditFinding f;
  VT_RETURN_IF_ERROR(r.unsigned64("epoch", f.epoch, true));
  std::string root;
  VT_RETURN_IF_ERROR(r.string("committed_root", root, true));
  VT_ASSIGN_OR_RETURN(f.committed_root, digest_from_hex(root, r.path_of("committed_root")));
  VT_RETURN_IF_ERROR(r.string("replay_root", root, true));
  VT_ASSIGN_OR_RETURN(f.replay_root, digest_from_hex(root, r.path_of("replay_root")));
  VT_RETURN_IF_ERROR(r.boolean("bit_identical", f.bit_identical, true));
  VT_RETURN_IF_ERROR(r.boolean("within_tolerance", f.within_tolerance, true));
  VT_RETURN_IF_ERROR(optional_step(r, "first_diverging_step", f.first_diverging_step));
  VT_RETURN_IF_ERROR(optional_step(r, "last_matching_step", f.last_matching_step));
  VT_RETURN_IF_ERROR(r.string("stored_state_problem", f.stored_state_problem));
  VT_RETURN_IF_ERROR(r.string("start_state_problem", f.start_state_problem));
  VT_RETURN_IF_ERROR(r.string("irreproducible", f.irreproducible));
  if (r.value().contains("second_replay_root")) {
    VT_RETURN_IF_ERROR(r.string("second_replay_root", root, true));
    VT_ASSIGN_OR_RETURN(f.second_replay_root,
                        digest_from_hex(root, r.path_of("second_replay_root")));
  }
  VT_ASSIGN_OR_RETURN(const nlohmann::json* differences, r.find("differences", true, "an array"));
  if (!differences->is_array()) return r.wrong("differences", "an array", *differences);
  for (std::size_t i = 0; i < differences->size(); ++i) {
    VT_ASSIGN_OR_RETURN(
        TensorDifference d,
        difference_from_json((*differences)[i], "finding.differences[" + std::to_string(i) + "]"));
    f.differences.push_back(std::move(d));
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
  if (f.second_replay_root) j["second_replay_root"] = hex_encode(*f.second_replay_root);
  if (!f.irreproducible.empty()) j["irreproducible"] = f.irreproducible;
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
  if (!doc.is_object())
    return invalid_input("evidence: expected an object with evidence, signature and signer");
  const JsonFields top(doc, "evidence file", "", "the evidence file");
  std::string signer_hex, signature_hex;
  VT_RETURN_IF_ERROR(top.string("signer", signer_hex, true));
  VT_RETURN_IF_ERROR(top.string("signature", signature_hex, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* body, top.find("evidence", true, "an object"));
  const nlohmann::json& evidence = *body;
  VT_ASSIGN_OR_RETURN(Bytes signer_raw, hex_decode(signer_hex));
  VT_ASSIGN_OR_RETURN(PublicKey signer, PublicKey::from_raw(signer_raw));
  VT_ASSIGN_OR_RETURN(Bytes signature, hex_decode(signature_hex));
  if (!signer.verify(as_bytes(canonical_json(evidence)), signature)) {
    return rejected(
        "evidence: the auditor's signature does not cover this content (edited after signing?)");
  }
  // Signed is not the same as well-formed: check the shape before reading it.
  if (!evidence.is_object()) return top.wrong("evidence", "an object", evidence);
  const JsonFields r(evidence, "evidence");
  std::string format, id;
  VT_RETURN_IF_ERROR(r.string("format", format, true));
  VT_RETURN_IF_ERROR(r.string("task_id", id, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* finding, r.find("finding", true, "an object"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* records,
                      r.find("provider_records", true, "an array of two records"));
  if (format != kEvidenceFormat) return r.problem("format", "unknown format \"" + format + "\"");
  if (id != hex_encode(task_id(task))) {
    return rejected("evidence: it is about task " + id + ", not this task");
  }
  // The provider's own signed commitments are inside: they must verify under their signer key.
  const auto& lines = *records;
  if (!lines.is_array() || lines.size() != 2)
    return r.wrong("provider_records", "an array of two records", lines);
  for (const auto& line : lines) {
    if (!line.is_string()) return invalid_input("evidence: a provider record is not a string");
    const std::string text = line.get<std::string>();
    VT_ASSIGN_OR_RETURN(SignedRecord record,
                        decode_record(as_bytes(text), "evidence provider record"));
    VT_ASSIGN_OR_RETURN(PublicKey provider, PublicKey::from_raw(record.record.signer));
    if (!provider.verify(as_bytes(record.body), record.signature))
      return rejected("evidence: a provider record's signature is invalid");
  }
  SignedEvidence out;
  out.auditor_fingerprint = signer.fingerprint();
  VT_ASSIGN_OR_RETURN(out.claimed, finding_from_json(*finding));
  return out;
}

}  // namespace vt::verifier
