#include "verifier/audit.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "training/live_fingerprint.h"
#include "verifier/epoch_check.h"

namespace vt::verifier {
namespace {

constexpr std::size_t kPositionsReported = 8;
constexpr const char* kEvidenceFormat = "veritrain.evidence.v1";

// Per tensor, which sampled positions differ bit for bit.
std::vector<TensorDifference> differences(const fp::Fingerprint& replay,
                                          const fp::Fingerprint& committed) {
  std::vector<TensorDifference> out;
  for (std::size_t t = 0; t < committed.plan.tensors.size() && t < replay.values.size(); ++t) {
    const fp::TensorSamples& s = committed.plan.tensors[t];
    const std::size_t width = dtype_size(s.dtype);
    TensorDifference d{s.name, 0, s.indices.size(), {}};
    for (std::size_t i = 0; i < s.indices.size(); ++i) {
      if (std::memcmp(replay.values[t].data() + i * width, committed.values[t].data() + i * width,
                      width) != 0) {
        ++d.differing;
        if (d.positions.size() < kPositionsReported) d.positions.push_back(s.indices[i]);
      }
    }
    if (d.differing > 0) out.push_back(std::move(d));
  }
  return out;
}

const SignedRecord* find_epoch(const std::vector<SignedRecord>& records, std::uint64_t epoch) {
  for (const SignedRecord& r : records) {
    if (r.record.epoch == epoch) return &r;
  }
  return nullptr;
}

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
  return j;
}

Result<AuditFinding> audit_epoch(EvidenceSource& source, const Task& task, std::uint64_t epoch,
                                 const training::TrainerOptions& trainer_options) {
  if (epoch == 0)
    return invalid_input("--epoch: epoch 0 is the initial state; audit epochs 1.." +
                         std::to_string(task.epochs));
  const Digest id = task_id(task);
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  if (auto checked = verify_log(records, id); !checked) return rejected(checked.error().message);
  const SignedRecord* before = find_epoch(records, epoch - 1);
  const SignedRecord* after = find_epoch(records, epoch);
  if (before == nullptr || after == nullptr) {
    return invalid_input("--epoch " + std::to_string(epoch) + ": the log commits epochs 0.." +
                         std::to_string(records.size() - 1));
  }
  VT_ASSIGN_OR_RETURN(Bytes start, source.snapshot(epoch - 1, before->record.root, std::nullopt));
  // The same checks a verifier makes before replaying (epoch_check.h): what the provider got
  // wrong in the state it committed is a rejection naming the epoch, not an input error.
  VT_ASSIGN_OR_RETURN(CheckContext ctx, make_check_context(task, trainer_options));
  if (auto problems = check_committed_state(start, *before, ctx); !problems.empty()) {
    return rejected("epoch " + std::to_string(epoch - 1) +
                    ": the committed state: " + problems.front());
  }
  auto restored = restore_committed(task, start, trainer_options);
  if (!restored && restored.error().code == Errc::kRejected) {
    return rejected("epoch " + std::to_string(epoch - 1) + ": " + restored.error().message);
  }
  VT_ASSIGN_OR_RETURN(auto trainer, std::move(restored));

  // Replay, gathering the trail at the committed positions as the steps pass.
  std::vector<fp::Fingerprint> committed_trail;
  for (const auto& t : after->record.trail) {
    auto f = fp::fingerprint_from_json(t);
    if (!f)
      return rejected("epoch " + std::to_string(epoch) +
                      ": committed trail is malformed: " + f.error().message);
    committed_trail.push_back(std::move(*f));
  }
  std::vector<fp::Fingerprint> replay_trail;
  Status gather_status;
  training::EpochHooks hooks;
  hooks.trail_every = task.fingerprint.trail_interval;
  hooks.on_trail = [&](std::int64_t, const training::Trainer& t) {
    const std::size_t i = replay_trail.size();
    if (!gather_status || i >= committed_trail.size()) return;
    auto f = provider::gather_live(t, committed_trail[i].plan);
    if (f) {
      replay_trail.push_back(std::move(*f));
    } else {
      gather_status = f.error();
    }
  };
  VT_ASSIGN_OR_RETURN(training::EpochSummary summary, trainer->train_epoch(hooks));
  VT_RETURN_IF_ERROR(gather_status);
  VT_ASSIGN_OR_RETURN(Bytes replay, trainer->snapshot());

  AuditFinding f;
  f.epoch = epoch;
  f.committed_root = after->record.root;
  f.replay_root = fp::merkle_root(replay);
  f.bit_identical = f.replay_root == f.committed_root;
  f.steps = summary.steps;
  f.trail_interval = task.fingerprint.trail_interval;
  VT_ASSIGN_OR_RETURN(fp::Fingerprint committed_fp,
                      fp::fingerprint_from_json(after->record.fingerprint));
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(replay));
  VT_ASSIGN_OR_RETURN(fp::Fingerprint replay_fp, fp::gather(committed_fp.plan, view));
  VT_ASSIGN_OR_RETURN(fp::Comparison final_cmp,
                      fp::compare(replay_fp, committed_fp, compare_mode(task), tolerance_of(task)));
  f.within_tolerance = final_cmp.match;
  if (f.bit_identical) {
    f.summary = "epoch " + std::to_string(epoch) + " replays bit-identically (root " +
                hex_encode(f.replay_root) + ")";
    return f;
  }
  f.last_matching_step = 0;
  for (std::size_t i = 0; i < committed_trail.size(); ++i) {
    const std::int64_t step = static_cast<std::int64_t>(i + 1) * f.trail_interval;
    if (i >=
        replay_trail.size()) {  // the provider committed more trail points than the task has steps
      f.first_diverging_step = step;
      break;
    }
    if (replay_trail[i] == committed_trail[i]) {
      f.last_matching_step = step;
      continue;
    }
    f.first_diverging_step = step;
    f.differences = differences(replay_trail[i], committed_trail[i]);
    break;
  }
  if (!f.first_diverging_step) {
    f.differences = differences(replay_fp, committed_fp);
    f.summary = "epoch " + std::to_string(epoch) + " diverges after the last trail point (step " +
                std::to_string(*f.last_matching_step) + "), before the end of the epoch";
  } else {
    f.summary = "epoch " + std::to_string(epoch) + " first diverges between step " +
                std::to_string(*f.last_matching_step) + " and step " +
                std::to_string(*f.first_diverging_step) + " of " + std::to_string(f.steps);
  }
  if (!f.differences.empty()) {
    f.summary += "; " + std::to_string(f.differences.size()) + " tensors differ, first " +
                 f.differences.front().tensor;
  }
  return f;
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

Result<EvidenceCheck> check_evidence(const std::string& evidence_json, EvidenceSource& source,
                                     const Task& task, const training::TrainerOptions& trainer) {
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
  EvidenceCheck check;
  check.auditor_fingerprint = signer.fingerprint();
  VT_ASSIGN_OR_RETURN(check.claimed, finding_from_json(evidence["finding"]));
  VT_ASSIGN_OR_RETURN(check.recomputed, audit_epoch(source, task, check.claimed.epoch, trainer));
  check.agrees = check.recomputed.bit_identical == check.claimed.bit_identical &&
                 check.recomputed.replay_root == check.claimed.replay_root &&
                 check.recomputed.committed_root == check.claimed.committed_root &&
                 check.recomputed.first_diverging_step == check.claimed.first_diverging_step &&
                 check.recomputed.last_matching_step == check.claimed.last_matching_step;
  return check;
}

}  // namespace vt::verifier
