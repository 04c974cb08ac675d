#pragma once
// The verdict of a verification (docs/verdict.md): what was challenged, what each check
// measured beside the thresholds it was judged against, and the result, signed by the
// verifier.
//
// verdict.json is one line of canonical JSON and a newline:
//
//   {"signature":"<128 hex>","signer":"<64 hex>","verdict":BODY}\n
//
// BODY is the canonical JSON of the verdict object, and the Ed25519 signature covers exactly
// those BODY bytes, as they stand in the file: a third party cuts them out (everything after
// the fixed-length prefix up to the final "}\n") and checks them with any Ed25519 tool,
// without re-serializing JSON. "signer" is the raw public key; BODY repeats it under
// verifier.key so that the signed bytes name their signer.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/environment.h"
#include "protocol/keys.h"
#include "verifier/check/epoch_check.h"
#include "verifier/policy/policy.h"

namespace vt::verifier {

inline constexpr std::string_view kVerdictFormat = "veritrain.verdict.v1";

struct Verdict {
  std::string task_id;               // hex
  std::string log_head;              // hex hash of the last record judged; "" when none was read
  std::uint64_t epochs = 0;          // N: the task's epochs
  std::string source;                // EvidenceSource::describe()
  std::string provider_key;          // SHA-256 of the key that signed the log, hex; "" if unread
  bool provider_key_pinned = false;  // checked against --provider-key
  // The key --provider-key named, whether or not a signature could be checked under it: a log
  // that cannot be read leaves provider_key empty, and the verdict still says what was pinned.
  std::string provider_key_given;
  bool online = false;  // challenges were drawn while training ran
  ChallengePlan plan;
  std::vector<EpochCheck> checks;         // one per challenged epoch, ascending
  std::vector<std::string> log_failures;  // from check_log / check_final_model
  std::vector<std::string> notes;         // anything people should know; not a failure
  std::uint64_t bytes_fetched = 0;        // for the whole run
  std::string started, finished;          // UTC, utc_now_iso8601()
  // Each committed epoch's claimed metrics.loss (index = epoch), for the report's plot; not part
  // of the signed body (the log holds them, signed by the provider).
  std::vector<double> claimed_loss;
  // The same for metrics.eval (held-out loss and accuracy; nullopt where a record has none).
  std::vector<std::optional<EvalClaim>> claimed_eval;
  // The arithmetic environment (docs/environment.md): what epoch 0 committed, this verifier's
  // after matching it, and the conditions of exactness this verifier could not reproduce.
  // Exact mode only; a verdict with unmatched conditions judges nothing that depends on them.
  Environment committed_environment;
  Environment verifier_environment;
  std::vector<EnvironmentDifference> environment_unmatched;
  std::string environment_judge;  // what_would_judge(): who could judge an inconclusive run
  // Set by finalize_verdict. Inconclusive: nothing the provider did was found wrong, and this
  // verifier could not reproduce its environment to replay (never a rejection).
  bool accepted = false;
  bool inconclusive = false;
  std::vector<std::string> reasons;  // why it was rejected, each naming the epoch and what failed
};

// Accepted iff there are no log failures, at least one epoch was challenged, every challenged
// epoch has a check and every check passed. With unmatched environment conditions nothing was
// replayed: inconclusive unless the log itself failed. Fills accepted, inconclusive and
// reasons; sets finished if empty.
void finalize_verdict(Verdict& verdict);

// "accepted", "rejected" or "inconclusive".
std::string verdict_result(const Verdict& verdict);

// The BODY object. `verifier` is the key that will sign it.
nlohmann::json verdict_to_json(const Verdict& verdict, const PublicKey& verifier);

// The whole file text, newline included.
Result<std::string> signed_verdict_text(const Verdict& verdict, const SigningKey& key);
// Writes it atomically.
Status write_verdict_file(const std::filesystem::path& path, const Verdict& verdict,
                          const SigningKey& key);

struct CheckedVerdict {
  nlohmann::json verdict;  // BODY, parsed
  PublicKey signer;
  bool accepted = false;
  std::string result;  // "accepted", "rejected" or "inconclusive"
  std::string task_id;
  std::string provider_key;  // verdict.provider.key
  bool provider_key_pinned = false;
};

// Checks the layout, the signature over BODY, that BODY is canonical JSON of a verdict object
// of this format naming the same signer, and (when given) that the signer is `expected`.
// A bad signature or a wrong signer is Errc::kRejected; a malformed file Errc::kInvalidInput.
Result<CheckedVerdict> verify_verdict_text(std::string_view text,
                                           const std::optional<PublicKey>& expected,
                                           std::string_view where = "verdict");
Result<CheckedVerdict> verify_verdict_file(const std::filesystem::path& path,
                                           const std::optional<PublicKey>& expected = std::nullopt);

// The verdict and what it proves, in one sentence for people: "Accepted: 3 of 20 epochs
// replayed, each matching the provider's commitments; a provider cheating on 10 % of epochs
// (2 of 20) is caught with probability at least 0.99." A rejection names its first reason.
std::string verdict_sentence(const Verdict& verdict);

// A failure as said under its epoch's heading: "epoch 5: the committed snapshot ..." reads "the
// committed snapshot ..." (failures name their epoch; a line about that epoch says it once).
std::string without_epoch_prefix(const std::string& failure, std::uint64_t epoch);

// Whose key signed the log and whether it is the key the verifier pinned, for people; says so
// when no record could be read (and which key was given, if one was).
std::string provider_key_text(const Verdict& verdict);

// For people: what was checked, what passed, what failed and where the report is. Several
// lines, each ending in '\n'. `report_dir` may be empty.
std::string verdict_summary(const Verdict& verdict, const std::filesystem::path& report_dir);

}  // namespace vt::verifier
