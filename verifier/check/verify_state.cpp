#include "verifier/check/verify_state.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/json.h"
#include "common/json_fields.h"
#include "common/json_number.h"

namespace vt::verifier {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kMaxStateFile = 16u << 20;  // one check with its notes; generous

// The state must give back exactly what was judged: non-finite values keep their kind.
json number(double v) { return json_number(v, NonFinite::kText); }

json eval_claim_json(const std::optional<EvalClaim>& e) {
  if (!e) return nullptr;
  return {{"loss", number(e->loss)},
          {"accuracy", e->accuracy ? number(*e->accuracy) : json(nullptr)},
          {"examples", e->examples}};
}

Result<std::optional<EvalClaim>> eval_claim_from(const JsonFields& parent, std::string_view key) {
  VT_ASSIGN_OR_RETURN(const json* v, parent.find(key, true, "an object or null"));
  if (v->is_null()) return std::optional<EvalClaim>();
  VT_ASSIGN_OR_RETURN(JsonFields r, parent.child(key, true));
  EvalClaim e;
  VT_RETURN_IF_ERROR(r.number_or_null("loss", e.loss, true));
  VT_RETURN_IF_ERROR(r.number_or_none("accuracy", e.accuracy));
  VT_RETURN_IF_ERROR(r.unsigned64("examples", e.examples, true));
  return std::optional<EvalClaim>(e);
}

// A comparison field, or null when the check made none.
Result<std::optional<fp::Comparison>> comparison_from(const JsonFields& parent,
                                                      std::string_view key) {
  VT_ASSIGN_OR_RETURN(const json* v, parent.find(key, true, "a comparison or null"));
  if (v->is_null()) return std::optional<fp::Comparison>();
  VT_ASSIGN_OR_RETURN(fp::Comparison c, fp::comparison_from_json(*v, parent.path_of(key)));
  return std::optional<fp::Comparison>(std::move(c));
}

json policy_json(const PolicyRequest& p) {
  json economics = nullptr;
  if (p.economics) {
    economics = {{"reward", number(p.economics->reward)},
                 {"penalty", number(p.economics->penalty)},
                 {"cost", number(p.economics->cost)},
                 {"cost_basis", p.economics->cost_basis}};
  }
  return {{"confidence", number(p.confidence)},
          {"cheat_fraction", number(p.cheat_fraction)},
          {"check_probability", p.check_probability ? number(*p.check_probability) : json(nullptr)},
          {"economics", std::move(economics)}};
}

Result<PolicyRequest> policy_from(const JsonFields& parent) {
  VT_ASSIGN_OR_RETURN(JsonFields r, parent.child("policy", true));
  PolicyRequest p;
  VT_RETURN_IF_ERROR(r.number_or_null("confidence", p.confidence, true));
  VT_RETURN_IF_ERROR(r.number_or_null("cheat_fraction", p.cheat_fraction, true));
  VT_RETURN_IF_ERROR(r.number_or_none("check_probability", p.check_probability));
  VT_ASSIGN_OR_RETURN(const json* e, r.find("economics", true, "an object or null"));
  if (!e->is_null()) {
    VT_ASSIGN_OR_RETURN(JsonFields er, r.child("economics", true));
    EconomicsRequest econ;
    VT_RETURN_IF_ERROR(er.number_or_null("reward", econ.reward, true));
    VT_RETURN_IF_ERROR(er.number_or_null("penalty", econ.penalty, true));
    VT_RETURN_IF_ERROR(er.number_or_null("cost", econ.cost, true));
    VT_RETURN_IF_ERROR(er.string("cost_basis", econ.cost_basis, true));
    p.economics = std::move(econ);
  }
  return p;
}

Result<json> read_json_file(const fs::path& path) {
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(path, kMaxStateFile));
  return parse_json(text, path.string());
}

}  // namespace

fs::path state_dir(const fs::path& report_dir) { return report_dir / ".verify-state"; }

nlohmann::json epoch_check_to_json(const EpochCheck& c) {
  return {{"epoch", c.epoch},
          {"passed", c.passed},
          {"failures", c.failures},
          {"fingerprint", c.fingerprint ? fp::comparison_to_json(*c.fingerprint, NonFinite::kText)
                                        : json(nullptr)},
          {"full_state",
           c.full_state ? fp::comparison_to_json(*c.full_state, NonFinite::kText) : json(nullptr)},
          {"replayed", c.replayed},
          {"replay_root_matches", c.replay_root_matches},
          {"replay_root", hex_encode(c.replay_root)},
          {"replay_seconds", number(c.replay_seconds)},
          {"bytes_fetched", c.bytes_fetched},
          {"after_fetched", c.after_fetched},
          {"replay_notes", c.replay_notes},
          {"claimed_loss", number(c.claimed_loss)},
          {"replay_loss", c.replay_loss ? number(*c.replay_loss) : json(nullptr)},
          {"loss_verified", c.loss_verified},
          {"trail_verified", c.trail_verified},
          {"claimed_eval", eval_claim_json(c.claimed_eval)},
          {"replay_eval", eval_claim_json(c.replay_eval)},
          {"eval_status", c.eval_status},
          {"second_replay_root",
           c.second_replay_root ? json(hex_encode(*c.second_replay_root)) : json(nullptr)},
          {"second_replay_seconds", number(c.second_replay_seconds)},
          {"irreproducible", c.irreproducible}};
}

Result<EpochCheck> epoch_check_from_json(const nlohmann::json& j, std::string_view where) {
  const JsonFields r(j, std::string(where));
  EpochCheck c;
  VT_RETURN_IF_ERROR(r.unsigned64("epoch", c.epoch, true));
  VT_RETURN_IF_ERROR(r.boolean("passed", c.passed, true));
  VT_RETURN_IF_ERROR(r.strings("failures", c.failures, true));
  VT_ASSIGN_OR_RETURN(c.fingerprint, comparison_from(r, "fingerprint"));
  VT_ASSIGN_OR_RETURN(c.full_state, comparison_from(r, "full_state"));
  // State saved before "replayed" existed: a judged comparison means the epoch was replayed.
  c.replayed = c.fingerprint.has_value();
  VT_RETURN_IF_ERROR(r.boolean("replayed", c.replayed, false));
  VT_RETURN_IF_ERROR(r.boolean("replay_root_matches", c.replay_root_matches, true));
  std::string root;
  VT_RETURN_IF_ERROR(r.string("replay_root", root, true));
  VT_ASSIGN_OR_RETURN(c.replay_root, digest_from_hex(root, r.path_of("replay_root")));
  VT_RETURN_IF_ERROR(r.number_or_null("replay_seconds", c.replay_seconds, true));
  VT_RETURN_IF_ERROR(r.unsigned64("bytes_fetched", c.bytes_fetched, true));
  VT_RETURN_IF_ERROR(r.boolean("after_fetched", c.after_fetched, true));
  VT_RETURN_IF_ERROR(r.strings("replay_notes", c.replay_notes, true));
  VT_RETURN_IF_ERROR(r.number_or_null("claimed_loss", c.claimed_loss, true));
  // Null for no replay; a replay's non-finite loss is saved as text ("nan", "inf").
  VT_ASSIGN_OR_RETURN(const json* loss, r.find("replay_loss", true, "a number or null"));
  if (!loss->is_null()) {
    double replayed = 0.0;
    VT_RETURN_IF_ERROR(r.number_or_null("replay_loss", replayed, true));
    c.replay_loss = replayed;
  }
  VT_RETURN_IF_ERROR(r.boolean("loss_verified", c.loss_verified, true));
  VT_RETURN_IF_ERROR(r.boolean("trail_verified", c.trail_verified, true));
  VT_ASSIGN_OR_RETURN(c.claimed_eval, eval_claim_from(r, "claimed_eval"));
  VT_ASSIGN_OR_RETURN(c.replay_eval, eval_claim_from(r, "replay_eval"));
  VT_RETURN_IF_ERROR(r.string("eval_status", c.eval_status, true));
  if (c.eval_status != "claimed" && c.eval_status != "verified" &&
      c.eval_status != "within_tolerance") {
    return r.wrong("eval_status", "\"claimed\", \"verified\" or \"within_tolerance\"",
                   c.eval_status);
  }
  // Absent in state saved before second replays existed: none ran.
  if (r.value().contains("second_replay_root") && !r.value()["second_replay_root"].is_null()) {
    VT_RETURN_IF_ERROR(r.string("second_replay_root", root, true));
    VT_ASSIGN_OR_RETURN(c.second_replay_root,
                        digest_from_hex(root, r.path_of("second_replay_root")));
  }
  VT_RETURN_IF_ERROR(r.number_or_null("second_replay_seconds", c.second_replay_seconds, false));
  VT_RETURN_IF_ERROR(r.string("irreproducible", c.irreproducible, false));
  return c;
}

Status begin_state(const fs::path& dir, const VerifyState& state) {
  std::error_code ec;
  fs::remove_all(dir, ec);  // a finished or abandoned run's files must not mix with this one's
  fs::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return io_error(errno_text(errno, "creating", dir));
  const json j = {{"format", kVerifyStateFormat},   {"task_id", state.task_id},
                  {"log_head", state.log_head},     {"seed", state.seed_hex},
                  {"seed_given", state.seed_given}, {"policy", policy_json(state.policy)}};
  return write_file_atomic(dir / "state.json", j.dump() + "\n", 0600);
}

Status save_check(const fs::path& dir, const EpochCheck& check) {
  return write_file_atomic(dir / ("epoch-" + std::to_string(check.epoch) + ".json"),
                           epoch_check_to_json(check).dump() + "\n", 0600);
}

Result<VerifyState> load_state(const fs::path& dir) {
  const fs::path file = dir / "state.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return invalid_input("--resume: " + file.string() +
                         " does not exist: nothing to resume (the run finished, or "
                         "never got as far as drawing its challenges)");
  }
  VT_ASSIGN_OR_RETURN(json j, read_json_file(file));
  const JsonFields r(j, file.string());
  std::string format;
  VT_RETURN_IF_ERROR(r.string("format", format, true));
  if (format != kVerifyStateFormat) {
    std::string expected = "\"";  // built by append: GCC 12 warns falsely on "x" + string
    expected.append(kVerifyStateFormat).append("\" (start a new verify)");
    return r.wrong("format", expected, format);
  }
  sweep_temp_files(dir);
  VerifyState s;
  VT_RETURN_IF_ERROR(r.string("task_id", s.task_id, true));
  VT_RETURN_IF_ERROR(r.string("log_head", s.log_head, true));
  VT_RETURN_IF_ERROR(r.string("seed", s.seed_hex, true));
  VT_RETURN_IF_ERROR(r.boolean("seed_given", s.seed_given, true));
  VT_ASSIGN_OR_RETURN(s.policy, policy_from(r));
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("epoch-") || !name.ends_with(".json"))
      continue;  // temp files of a killed write
    VT_ASSIGN_OR_RETURN(json cj, read_json_file(entry.path()));
    VT_ASSIGN_OR_RETURN(EpochCheck c, epoch_check_from_json(cj, entry.path().string()));
    if (name != "epoch-" + std::to_string(c.epoch) + ".json") {
      return invalid_input(entry.path().string() + ": holds epoch " + std::to_string(c.epoch));
    }
    s.checks[c.epoch] = std::move(c);
  }
  if (ec) return io_error("reading " + dir.string() + ": " + ec.message());
  return s;
}

}  // namespace vt::verifier
