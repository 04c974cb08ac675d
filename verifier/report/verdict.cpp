#include "verifier/report/verdict.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/file_io.h"
#include "common/json.h"
#include "common/json_fields.h"
#include "common/text.h"
#include "protocol/log.h"
#include "verifier/report/html_page.h"

namespace vt::verifier {
namespace {

constexpr std::string_view kPrefixSignature = R"({"signature":")";
constexpr std::string_view kPrefixSigner = R"(","signer":")";
constexpr std::string_view kPrefixVerdict = R"(","verdict":)";
constexpr std::size_t kSignatureHex = 2 * kEd25519SignatureSize;
constexpr std::size_t kSignerHex = 2 * kEd25519PublicKeySize;

nlohmann::json optional_comparison(const std::optional<fp::Comparison>& c) {
  return c ? fp::comparison_to_json(*c) : nlohmann::json(nullptr);
}

nlohmann::json eval_to_json(const std::optional<EvalClaim>& e) {
  if (!e) return nullptr;
  return {{"loss", json_number(e->loss)},
          {"accuracy", e->accuracy ? json_number(*e->accuracy) : nlohmann::json(nullptr)},
          {"examples", e->examples}};
}

// Held-out metrics of a task with an eval split; null for tasks without one.
nlohmann::json eval_json(const EpochCheck& c) {
  if (!c.claimed_eval && !c.replay_eval) return nullptr;
  return {{"claimed", eval_to_json(c.claimed_eval)},
          {"replayed", eval_to_json(c.replay_eval)},
          {"status", c.eval_status}};
}

nlohmann::json check_to_json(const EpochCheck& c) {
  return {{"epoch", c.epoch},
          {"passed", c.passed},
          {"failures", c.failures},
          {"fingerprint", optional_comparison(c.fingerprint)},
          {"full_state", optional_comparison(c.full_state)},
          {"replayed", c.replayed},
          {"replay_root_matches", c.replay_root_matches},
          {"replay_root", hex_encode(c.replay_root)},
          {"replay_seconds", json_number(c.replay_seconds)},
          {"bytes_fetched", c.bytes_fetched},
          {"after_fetched", c.after_fetched},
          {"replay_notes", c.replay_notes},
          {"second_replay", c.second_replay_root
                                ? nlohmann::json{{"root", hex_encode(*c.second_replay_root)},
                                                 {"seconds", json_number(c.second_replay_seconds)},
                                                 {"agrees", c.irreproducible.empty()}}
                                : nlohmann::json(nullptr)},
          {"irreproducible",
           c.irreproducible.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.irreproducible)},
          // A metric is "verified" only where the replay reproduced its bits (exact mode).
          {"metrics",
           {{"loss",
             {{"claimed", json_number(c.claimed_loss)},
              {"replayed", c.replay_loss ? json_number(*c.replay_loss) : nlohmann::json(nullptr)},
              {"status", c.loss_verified ? "verified" : "claimed"}}},
            {"trail", c.trail_verified ? "verified" : "claimed"},
            {"eval", eval_json(c)}}}};
}

// The held-out metrics an epoch claims, and what the replay made of them.
std::string held_out_line(const EpochCheck& c) {
  char line[256];
  const EvalClaim& e = *c.claimed_eval;
  std::snprintf(line, sizeof line, "held-out loss %.6g", e.loss);
  std::string s = line;
  if (e.accuracy) {
    std::snprintf(line, sizeof line, ", accuracy %.4g%%", *e.accuracy * 100.0);
    s += line;
  }
  std::snprintf(line, sizeof line, " over %llu examples ",
                static_cast<unsigned long long>(e.examples));
  s += line;
  if (c.eval_status == "verified") return s + "(verified: the replay's bits)";
  if (c.eval_status == "within_tolerance") return s + "(within the tolerance-mode bounds)";
  return s + "(claimed)";
}

std::string comparison_line(const char* what, const fp::Comparison& c) {
  char buf[320];
  // A bit-for-bit comparison (portable or exact arithmetic) has no thresholds to quote: its
  // values are bit-identical or they are not.
  if (c.mode == fp::CompareMode::kExact && c.mismatches == 0) {
    std::snprintf(buf, sizeof buf, "%s bit-identical over %llu values", what,
                  static_cast<unsigned long long>(c.compared));
    return buf;
  }
  if (c.mode == fp::CompareMode::kExact) {
    std::snprintf(buf, sizeof buf,
                  "%s: %llu of %llu values differ (bit for bit: none allowed), max abs %.3g, rel "
                  "L2 %.3g",
                  what, static_cast<unsigned long long>(c.mismatches),
                  static_cast<unsigned long long>(c.compared), c.max_abs_diff, c.rel_l2);
    return buf;
  }
  std::snprintf(
      buf, sizeof buf,
      "%s %s: %llu of %llu values differ (allowed %llu), max abs %.3g, rel L2 %.3g (limit %.3g)",
      what, std::string(fp::compare_mode_name(c.mode)).c_str(),
      static_cast<unsigned long long>(c.mismatches), static_cast<unsigned long long>(c.compared),
      static_cast<unsigned long long>(c.allowed_mismatches), c.max_abs_diff, c.rel_l2,
      c.thresholds.rel_l2);
  return buf;
}

nlohmann::json environment_json(const Verdict& v) {
  nlohmann::json unmatched = nlohmann::json::array();
  for (const EnvironmentDifference& d : v.environment_unmatched)
    unmatched.push_back({{"field", d.field}, {"committed", d.committed}, {"here", d.here}});
  return {{"committed", environment_to_json(v.committed_environment)},
          {"verifier", environment_to_json(v.verifier_environment)},
          {"unmatched", std::move(unmatched)},
          {"would_judge", v.environment_judge}};
}

}  // namespace

std::string verdict_result(const Verdict& v) {
  return v.accepted ? "accepted" : v.inconclusive ? "inconclusive" : "rejected";
}

void finalize_verdict(Verdict& v) {
  v.reasons = v.log_failures;
  std::set<std::uint64_t> checked;
  bool unjudged_epoch = false;  // an epoch whose replays here disagree with each other
  for (const EpochCheck& c : v.checks) {
    checked.insert(c.epoch);
    if (c.passed) continue;
    if (c.inconclusive()) {
      unjudged_epoch = true;
      continue;
    }
    if (c.failures.empty()) {
      v.reasons.push_back("epoch " + std::to_string(c.epoch) +
                          ": check failed without a recorded reason");
    }
    v.reasons.insert(v.reasons.end(), c.failures.begin(), c.failures.end());
  }
  if (!v.environment_unmatched.empty()) {
    // Nothing was replayed: the checks that need no replay decide alone, and a run they find
    // nothing wrong with is not judged at all.
    v.inconclusive = v.reasons.empty();
    v.accepted = false;
    if (v.finished.empty()) v.finished = utc_now_iso8601();
    return;
  }
  // A log that failed stops the run before its challenges: one note says so, not a reason per
  // epoch that buries the one that matters.
  std::string unchecked;
  for (std::uint64_t e : v.plan.challenged) {
    if (checked.count(e)) continue;
    if (v.log_failures.empty()) {
      v.reasons.push_back("epoch " + std::to_string(e) + ": challenged but never checked");
    } else {
      unchecked += (unchecked.empty() ? "" : ", ") + std::to_string(e);
    }
  }
  if (!unchecked.empty() && std::find_if(v.notes.begin(), v.notes.end(), [](const std::string& n) {
                              return n.starts_with("challenged epochs not checked");
                            }) == v.notes.end()) {
    v.notes.push_back("challenged epochs not checked, because the log failed first: " + unchecked);
  }
  if (v.plan.challenged.empty() && v.log_failures.empty()) {
    v.reasons.push_back("no epoch was challenged, so nothing was verified");
  }
  // An epoch this verifier could not reproduce is neither evidence for the provider nor
  // against it: without a fault elsewhere the run is not judged.
  v.accepted = v.reasons.empty() && !unjudged_epoch;
  v.inconclusive = v.reasons.empty() && unjudged_epoch;
  if (v.finished.empty()) v.finished = utc_now_iso8601();
}

nlohmann::json verdict_to_json(const Verdict& v, const PublicKey& verifier) {
  nlohmann::json checks = nlohmann::json::array();
  for (const EpochCheck& c : v.checks) checks.push_back(check_to_json(c));
  return {
      {"format", kVerdictFormat},
      {"task_id", v.task_id},
      {"log_head", v.log_head},
      {"epochs", v.epochs},
      {"source", v.source},
      {"provider",
       {{"key", v.provider_key},
        {"pinned", v.provider_key_pinned},
        {"given", v.provider_key_given.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json(v.provider_key_given)}}},
      {"online", v.online},
      {"challenge", challenge_plan_to_json(v.plan)},
      {"checks", std::move(checks)},
      {"log_failures", v.log_failures},
      {"notes", v.notes},
      {"bytes_fetched", v.bytes_fetched},
      {"started", v.started},
      {"finished", v.finished},
      {"result", verdict_result(v)},
      {"environment", environment_json(v)},
      {"reasons", v.reasons},
      {"verifier", {{"key", hex_encode(verifier.raw())}, {"fingerprint", verifier.fingerprint()}}}};
}

Result<std::string> signed_verdict_text(const Verdict& verdict, const SigningKey& key) {
  std::string body;
  nlohmann::json object = verdict_to_json(verdict, key.public_key());
  try {
    body = canonical_json(object);
  } catch (const nlohmann::json::exception&) {
    // Only invalid UTF-8 in a message (a provider's error text) gets here. The provider must not
    // escape its verdict that way: such bytes become U+FFFD.
    try {
      object = nlohmann::json::parse(
          object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      body = canonical_json(object);
    } catch (const nlohmann::json::exception& e) {
      return internal_error(std::string("verdict: cannot serialize: ") + e.what());
    }
  }
  const Bytes signature = key.sign(as_bytes(body));
  std::string text;
  text.reserve(body.size() + 256);
  text.append(kPrefixSignature).append(hex_encode(signature));
  text.append(kPrefixSigner).append(hex_encode(key.public_key().raw()));
  text.append(kPrefixVerdict).append(body).append("}\n");
  return text;
}

Status write_verdict_file(const std::filesystem::path& path, const Verdict& verdict,
                          const SigningKey& key) {
  VT_ASSIGN_OR_RETURN(std::string text, signed_verdict_text(verdict, key));
  return write_file_atomic(path, text);
}

Result<CheckedVerdict> verify_verdict_text(std::string_view text,
                                           const std::optional<PublicKey>& expected,
                                           std::string_view where) {
  const std::string w(where);
  const std::size_t signer_at = kPrefixSignature.size() + kSignatureHex;
  const std::size_t verdict_at = signer_at + kPrefixSigner.size() + kSignerHex;
  const std::size_t body_at = verdict_at + kPrefixVerdict.size();
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (text.size() < body_at + 2 || !text.starts_with(kPrefixSignature) ||
      text.substr(signer_at, kPrefixSigner.size()) != kPrefixSigner ||
      text.substr(verdict_at, kPrefixVerdict.size()) != kPrefixVerdict || !text.ends_with('}')) {
    return invalid_input(
        w +
        R"(: expected {"signature":"<128 hex>","signer":"<64 hex>","verdict":{...}} on one line)");
  }
  Result<Bytes> signature = hex_decode(text.substr(kPrefixSignature.size(), kSignatureHex));
  if (!signature.ok()) return invalid_input(w + ": signature: " + signature.error().message);
  Result<Bytes> signer_raw = hex_decode(text.substr(signer_at + kPrefixSigner.size(), kSignerHex));
  if (!signer_raw.ok()) return invalid_input(w + ": signer: " + signer_raw.error().message);
  VT_ASSIGN_OR_RETURN(PublicKey signer, PublicKey::from_raw(*signer_raw));
  const std::string_view body = text.substr(body_at, text.size() - body_at - 1);
  if (!signer.verify(as_bytes(body), *signature)) {
    return rejected(
        w + ": the signature does not match the verdict (edited after signing, or another signer)");
  }
  if (expected && expected->raw() != signer.raw()) {
    return rejected(w + ": signed by " + signer.fingerprint() + ", expected " +
                    expected->fingerprint());
  }
  VT_ASSIGN_OR_RETURN(nlohmann::json verdict, parse_json(body, w + ": verdict"));
  if (!verdict.is_object() || canonical_json(verdict) != body) {
    return invalid_input(w + ": verdict: not a canonical JSON object");
  }
  // The verdict's own fields, read as every format's are (common/json_fields.h).
  const JsonFields r(verdict, w, "verdict");
  std::string format, result, task;
  VT_RETURN_IF_ERROR(r.string("format", format, true));
  if (format != kVerdictFormat)
    return r.problem("format", "expected \"" + std::string(kVerdictFormat) + "\"");
  VT_ASSIGN_OR_RETURN(const JsonFields verifier, r.child("verifier", true));
  std::string key;
  VT_RETURN_IF_ERROR(verifier.string("key", key, true));
  if (key != hex_encode(signer.raw()))
    return rejected(w + ": verdict.verifier.key does not name the key that signed it");
  VT_ASSIGN_OR_RETURN(const JsonFields provider, r.child("provider", true));
  std::string provider_key;
  bool pinned = false;
  VT_RETURN_IF_ERROR(provider.string("key", provider_key, true));
  VT_RETURN_IF_ERROR(provider.boolean("pinned", pinned, true));
  VT_RETURN_IF_ERROR(r.string("result", result, true));
  if (result != "accepted" && result != "rejected" && result != "inconclusive")
    return r.problem("result", "expected \"accepted\", \"rejected\" or \"inconclusive\"");
  VT_RETURN_IF_ERROR(r.string("task_id", task, true));
  CheckedVerdict out{std::move(verdict), std::move(signer), false, "", "", "", false};
  out.result = result;
  out.accepted = out.result == "accepted";
  out.task_id = task;
  out.provider_key = provider_key;
  out.provider_key_pinned = pinned;
  return out;
}

Result<CheckedVerdict> verify_verdict_file(const std::filesystem::path& path,
                                           const std::optional<PublicKey>& expected) {
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return verify_verdict_text(text, expected, path.string());
}

namespace {

// One epoch's first line: its result, whether it was re-run, and what crossed the network.
std::string epoch_heading(const EpochCheck& c) {
  char line[256];
  if (!c.replayed) {
    std::snprintf(line, sizeof line, "  epoch %llu  %s  not replayed, %s fetched\n",
                  static_cast<unsigned long long>(c.epoch), c.passed ? "passed" : "FAILED",
                  size_text(static_cast<double>(c.bytes_fetched)).c_str());
    return line;
  }
  std::snprintf(line, sizeof line, "  epoch %llu  %s  replayed in %.2f s, %s fetched%s\n",
                static_cast<unsigned long long>(c.epoch),
                c.passed           ? "passed"
                : c.inconclusive() ? "INCONCLUSIVE"
                                   : "FAILED",
                c.replay_seconds, size_text(static_cast<double>(c.bytes_fetched)).c_str(),
                c.passed && !c.after_fetched ? " (before state only)" : "");
  std::string heading = line;
  if (c.second_replay_root) {
    std::snprintf(line, sizeof line,
                  "    second replay (fresh process, scrambled memory) in %.2f s: %s the first\n",
                  c.second_replay_seconds,
                  c.irreproducible.empty() ? "bit-identical to" : "differs from");
    heading += line;
  }
  return heading;
}

}  // namespace

std::string provider_key_text(const Verdict& v) {
  if (!v.provider_key.empty()) {
    return v.provider_key +
           (v.provider_key_pinned ? " (pinned)" : " (NOT pinned: give --provider-key)");
  }
  if (!v.provider_key_given.empty()) {
    return v.provider_key_given +
           " (given with --provider-key; no record could be read, so no signature was checked "
           "under it)";
  }
  return "(no record could be read, and none was pinned)";
}

std::string without_epoch_prefix(const std::string& failure, std::uint64_t epoch) {
  const std::string prefix = "epoch " + std::to_string(epoch) + ": ";
  return failure.starts_with(prefix) ? failure.substr(prefix.size()) : failure;
}

std::string verdict_sentence(const Verdict& v) {
  std::size_t passed = 0, unjudged = 0;
  for (const EpochCheck& c : v.checks) {
    passed += c.passed ? 1 : 0;
    unjudged += c.inconclusive() ? 1 : 0;
  }
  const std::size_t failed = v.checks.size() - passed - unjudged;
  const ProbabilityDerivation& d = v.plan.derivation;
  const std::string replayed = std::to_string(v.checks.size()) + " of " +
                               count_text(static_cast<double>(v.epochs), "epoch") + " replayed";
  if (v.accepted) {
    std::string s = "Accepted: " + replayed + ", each matching the provider's commitments";
    if (!d.method.empty()) s += "; " + detection_claim(d);
    if (d.economics) {
      char buf[160];
      std::snprintf(
          buf, sizeof buf,
          "; with R = %g, D = %g and K = %g, cheating on any number of epochs does not pay",
          d.economics->reward, d.economics->penalty, d.economics->cost);
      s += buf;
    }
    return s + ".";
  }
  if (v.inconclusive && v.environment_unmatched.empty()) {
    std::string s = "Inconclusive: " + replayed + "; ";
    for (const EpochCheck& c : v.checks) {
      if (!c.inconclusive()) continue;
      s += printable(c.irreproducible, 4096);
      break;
    }
    if (unjudged > 1)
      s += " (and " + std::to_string(unjudged - 1) + " more such epoch" +
           (unjudged > 2 ? "s)" : ")");
    s += "; " + std::to_string(passed) + " matched the provider's commitments";
    return s + ", and nothing is held against the provider.";
  }
  if (v.inconclusive) {
    std::string s =
        "Inconclusive: this verifier cannot reproduce the provider's arithmetic environment (";
    for (std::size_t i = 0; i < v.environment_unmatched.size(); ++i) {
      const EnvironmentDifference& d = v.environment_unmatched[i];
      s += (i ? "; " : "") + d.field + " " + printable(d.committed) + " committed, " +
           printable(d.here) + " here";
    }
    return s + "), so no epoch was replayed and nothing is held against the provider; " +
           "what would judge it: " + v.environment_judge + ".";
  }
  std::string s = "Rejected: ";
  std::size_t not_replayed = 0;
  for (const EpochCheck& c : v.checks) not_replayed += c.replayed ? 0 : 1;
  if (!v.checks.empty() && not_replayed == 0) {
    s += replayed + ", " + std::to_string(failed) + " failed; ";
  } else if (!v.checks.empty()) {
    // Count replays as replays: an epoch whose evidence was unusable was challenged, not re-run.
    s += std::to_string(v.checks.size()) + " of " +
         count_text(static_cast<double>(v.epochs), "epoch") + " challenged, " +
         std::to_string(v.checks.size() - not_replayed) + " replayed, " + std::to_string(failed) +
         " failed (" + std::to_string(not_replayed) +
         " could not be replayed from the provider's evidence); ";
  }
  if (v.reasons.empty()) return s + "no reason was recorded.";
  s += printable(v.reasons.front(), 4096);
  if (v.reasons.size() > 1)
    s += " (and " + std::to_string(v.reasons.size() - 1) +
         (v.reasons.size() == 2 ? " more reason)" : " more reasons)");
  return s + ".";
}

std::string verdict_summary(const Verdict& v, const std::filesystem::path& report_dir) {
  std::string s;
  s += std::string(v.accepted       ? "ACCEPTED"
                   : v.inconclusive ? "INCONCLUSIVE"
                                    : "REJECTED") +
       "  task " + v.task_id.substr(0, 16) + "..., " +
       count_text(static_cast<double>(v.epochs), "epoch") + " from " + v.source + "\n";
  s += "provider key " + provider_key_text(v) + "\n";
  char line[256];
  if (!v.environment_unmatched.empty()) {
    // No policy was drawn: this verifier cannot replay (the differences follow below).
    std::snprintf(line, sizeof line, "challenged 0 of %llu epochs (no replays on this machine)\n",
                  static_cast<unsigned long long>(v.epochs));
  } else {
    std::snprintf(line, sizeof line, "challenged %zu of %llu epochs (p = %.4g, %s%s)\n",
                  v.plan.challenged.size(), static_cast<unsigned long long>(v.epochs),
                  v.plan.derivation.p, v.plan.derivation.method.c_str(),
                  v.plan.fallback_used ? "; none drawn, one picked uniformly" : "");
  }
  s += line;
  if (!v.plan.derivation.guarantee.empty()) s += "policy: " + v.plan.derivation.guarantee + "\n";
  s += "arithmetic: " + arithmetic_of(v.committed_environment) + "\n";
  std::set<std::string> said;  // failures shown under their epoch are not repeated as reasons
  for (const EpochCheck& c : v.checks) {
    s += epoch_heading(c);
    if (c.fingerprint) s += "    " + comparison_line("fingerprint", *c.fingerprint) + "\n";
    if (c.full_state) s += "    " + comparison_line("full state", *c.full_state) + "\n";
    if (c.replay_loss) {
      const bool bit_for_bit = c.fingerprint && c.fingerprint->mode == fp::CompareMode::kExact;
      if (c.loss_verified) {
        std::snprintf(line, sizeof line, "    loss %.6g (verified: the replay's bits)\n",
                      c.claimed_loss);
      } else if (bit_for_bit) {
        std::snprintf(line, sizeof line, "    loss %.6g (claimed; the replay's is %.6g)\n",
                      c.claimed_loss, *c.replay_loss);
      } else {
        std::snprintf(line, sizeof line,
                      "    loss %.6g (claimed; the replay's is not compared in tolerance mode)\n",
                      c.claimed_loss);
      }
      s += line;
    }
    if (c.claimed_eval) s += "    " + held_out_line(c) + "\n";
    for (const std::string& n : c.replay_notes) s += "    note: " + n + "\n";
    if (c.inconclusive())
      s += "    inconclusive: " + printable(without_epoch_prefix(c.irreproducible, c.epoch), 4096) +
           "\n";
    for (const std::string& f : c.failures) {
      s += "    failed: " + printable(without_epoch_prefix(f, c.epoch), 4096) + "\n";
      said.insert(f);
    }
  }
  // Reasons quote provider-chosen values: one more pass so that none reaches the terminal raw.
  for (const std::string& r : v.reasons) {
    if (!said.count(r)) s += "reason: " + printable(r, 4096) + "\n";
  }
  for (const std::string& n : v.notes) s += "note: " + n + "\n";
  s += verdict_sentence(v) + "\n";
  if (!report_dir.empty()) {
    s += "report: " + (report_dir / "report.html").string() +
         ", signed verdict: " + (report_dir / "verdict.json").string() + "\n";
  }
  return s;
}

}  // namespace vt::verifier
