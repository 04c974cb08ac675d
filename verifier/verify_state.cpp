#include "verifier/verify_state.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/json.h"

namespace vt::verifier {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kMaxStateFile = 16u << 20;  // one check with its notes; generous

json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// Reading with a path for messages: every accessor names the field it failed on.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}
  Error error(std::string_view field, std::string_view expected) const {
    return invalid_input(where_ + ": " + std::string(field) + ": expected " +
                         std::string(expected));
  }
  Result<const json*> at(const char* field) const {
    if (!j_.is_object() || !j_.contains(field))
      return invalid_input(where_ + ": " + field + ": missing");
    return &j_.at(field);
  }
  Result<double> real(const char* field) const {
    VT_ASSIGN_OR_RETURN(const json* v, at(field));
    if (v->is_number()) return v->get<double>();
    if (*v == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (*v == "inf") return std::numeric_limits<double>::infinity();
    if (*v == "-inf") return -std::numeric_limits<double>::infinity();
    return error(field, "a number");
  }
  Result<std::uint64_t> count(const char* field) const {
    VT_ASSIGN_OR_RETURN(const json* v, at(field));
    if (!v->is_number_unsigned()) return error(field, "an unsigned integer");
    return v->get<std::uint64_t>();
  }
  Result<bool> flag(const char* field) const {
    VT_ASSIGN_OR_RETURN(const json* v, at(field));
    if (!v->is_boolean()) return error(field, "true or false");
    return v->get<bool>();
  }
  Result<std::string> text(const char* field) const {
    VT_ASSIGN_OR_RETURN(const json* v, at(field));
    if (!v->is_string()) return error(field, "a string");
    return v->get<std::string>();
  }
  Result<std::vector<std::string>> texts(const char* field) const {
    VT_ASSIGN_OR_RETURN(const json* v, at(field));
    if (!v->is_array()) return error(field, "an array of strings");
    std::vector<std::string> out;
    for (const json& s : *v) {
      if (!s.is_string()) return error(field, "an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

json comparison_json(const fp::Comparison& c) {
  json first = nullptr;
  if (c.first_mismatch) {
    const fp::MismatchLocation& m = *c.first_mismatch;
    first = {{"tensor", m.tensor},           {"index", m.index},
             {"replay_bits", m.replay_bits}, {"committed_bits", m.committed_bits},
             {"replay", number(m.replay)},   {"committed", number(m.committed)}};
  }
  return {{"mode", fp::compare_mode_name(c.mode)},
          {"atol", number(c.thresholds.atol)},
          {"rtol", number(c.thresholds.rtol)},
          {"rel_l2_limit", number(c.thresholds.rel_l2)},
          {"max_outlier_fraction", number(c.thresholds.max_outlier_fraction)},
          {"compared", c.compared},
          {"mismatches", c.mismatches},
          {"nonfinite_mismatches", c.nonfinite_mismatches},
          {"allowed_mismatches", c.allowed_mismatches},
          {"max_abs_diff", number(c.max_abs_diff)},
          {"max_rel_diff", number(c.max_rel_diff)},
          {"rel_l2", number(c.rel_l2)},
          {"first_mismatch", std::move(first)},
          {"match", c.match}};
}

Result<std::optional<fp::Comparison>> comparison_from(const json& j, const std::string& where) {
  if (j.is_null()) return std::optional<fp::Comparison>();
  Reader r(j, where);
  fp::Comparison c;
  VT_ASSIGN_OR_RETURN(std::string mode, r.text("mode"));
  if (mode != "exact" && mode != "tolerance") return r.error("mode", "\"exact\" or \"tolerance\"");
  c.mode = mode == "exact" ? fp::CompareMode::kExact : fp::CompareMode::kTolerance;
  VT_ASSIGN_OR_RETURN(c.thresholds.atol, r.real("atol"));
  VT_ASSIGN_OR_RETURN(c.thresholds.rtol, r.real("rtol"));
  VT_ASSIGN_OR_RETURN(c.thresholds.rel_l2, r.real("rel_l2_limit"));
  VT_ASSIGN_OR_RETURN(c.thresholds.max_outlier_fraction, r.real("max_outlier_fraction"));
  VT_ASSIGN_OR_RETURN(c.compared, r.count("compared"));
  VT_ASSIGN_OR_RETURN(c.mismatches, r.count("mismatches"));
  VT_ASSIGN_OR_RETURN(c.nonfinite_mismatches, r.count("nonfinite_mismatches"));
  VT_ASSIGN_OR_RETURN(c.allowed_mismatches, r.count("allowed_mismatches"));
  VT_ASSIGN_OR_RETURN(c.max_abs_diff, r.real("max_abs_diff"));
  VT_ASSIGN_OR_RETURN(c.max_rel_diff, r.real("max_rel_diff"));
  VT_ASSIGN_OR_RETURN(c.rel_l2, r.real("rel_l2"));
  VT_ASSIGN_OR_RETURN(c.match, r.flag("match"));
  VT_ASSIGN_OR_RETURN(const json* first, r.at("first_mismatch"));
  if (!first->is_null()) {
    Reader m(*first, where + ".first_mismatch");
    fp::MismatchLocation loc;
    VT_ASSIGN_OR_RETURN(loc.tensor, m.text("tensor"));
    VT_ASSIGN_OR_RETURN(loc.index, m.count("index"));
    VT_ASSIGN_OR_RETURN(loc.replay_bits, m.text("replay_bits"));
    VT_ASSIGN_OR_RETURN(loc.committed_bits, m.text("committed_bits"));
    VT_ASSIGN_OR_RETURN(loc.replay, m.real("replay"));
    VT_ASSIGN_OR_RETURN(loc.committed, m.real("committed"));
    c.first_mismatch = std::move(loc);
  }
  return std::optional<fp::Comparison>(std::move(c));
}

json eval_claim_json(const std::optional<EvalClaim>& e) {
  if (!e) return nullptr;
  return {{"loss", number(e->loss)},
          {"accuracy", e->accuracy ? number(*e->accuracy) : json(nullptr)},
          {"examples", e->examples}};
}

Result<std::optional<EvalClaim>> eval_claim_from(const json& j, const std::string& where) {
  if (j.is_null()) return std::optional<EvalClaim>();
  Reader r(j, where);
  EvalClaim e;
  VT_ASSIGN_OR_RETURN(e.loss, r.real("loss"));
  VT_ASSIGN_OR_RETURN(const json* accuracy, r.at("accuracy"));
  if (!accuracy->is_null()) {
    VT_ASSIGN_OR_RETURN(e.accuracy, r.real("accuracy"));
  }
  VT_ASSIGN_OR_RETURN(e.examples, r.count("examples"));
  return std::optional<EvalClaim>(e);
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

Result<PolicyRequest> policy_from(const json& j, const std::string& where) {
  Reader r(j, where);
  PolicyRequest p;
  VT_ASSIGN_OR_RETURN(p.confidence, r.real("confidence"));
  VT_ASSIGN_OR_RETURN(p.cheat_fraction, r.real("cheat_fraction"));
  VT_ASSIGN_OR_RETURN(const json* fixed, r.at("check_probability"));
  if (!fixed->is_null()) {
    VT_ASSIGN_OR_RETURN(p.check_probability, r.real("check_probability"));
  }
  VT_ASSIGN_OR_RETURN(const json* e, r.at("economics"));
  if (!e->is_null()) {
    Reader er(*e, where + ".economics");
    EconomicsRequest econ;
    VT_ASSIGN_OR_RETURN(econ.reward, er.real("reward"));
    VT_ASSIGN_OR_RETURN(econ.penalty, er.real("penalty"));
    VT_ASSIGN_OR_RETURN(econ.cost, er.real("cost"));
    VT_ASSIGN_OR_RETURN(econ.cost_basis, er.text("cost_basis"));
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
          {"fingerprint", c.fingerprint ? comparison_json(*c.fingerprint) : json(nullptr)},
          {"full_state", c.full_state ? comparison_json(*c.full_state) : json(nullptr)},
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
          {"eval_status", c.eval_status}};
}

Result<EpochCheck> epoch_check_from_json(const nlohmann::json& j, std::string_view where) {
  const std::string w(where);
  Reader r(j, w);
  EpochCheck c;
  VT_ASSIGN_OR_RETURN(c.epoch, r.count("epoch"));
  VT_ASSIGN_OR_RETURN(c.passed, r.flag("passed"));
  VT_ASSIGN_OR_RETURN(c.failures, r.texts("failures"));
  VT_ASSIGN_OR_RETURN(const json* f, r.at("fingerprint"));
  VT_ASSIGN_OR_RETURN(c.fingerprint, comparison_from(*f, w + ".fingerprint"));
  VT_ASSIGN_OR_RETURN(const json* s, r.at("full_state"));
  VT_ASSIGN_OR_RETURN(c.full_state, comparison_from(*s, w + ".full_state"));
  VT_ASSIGN_OR_RETURN(c.replay_root_matches, r.flag("replay_root_matches"));
  VT_ASSIGN_OR_RETURN(std::string root, r.text("replay_root"));
  VT_ASSIGN_OR_RETURN(c.replay_root, digest_from_hex(root, w + ".replay_root"));
  VT_ASSIGN_OR_RETURN(c.replay_seconds, r.real("replay_seconds"));
  VT_ASSIGN_OR_RETURN(c.bytes_fetched, r.count("bytes_fetched"));
  VT_ASSIGN_OR_RETURN(c.after_fetched, r.flag("after_fetched"));
  VT_ASSIGN_OR_RETURN(c.replay_notes, r.texts("replay_notes"));
  VT_ASSIGN_OR_RETURN(c.claimed_loss, r.real("claimed_loss"));
  VT_ASSIGN_OR_RETURN(const json* loss, r.at("replay_loss"));
  if (!loss->is_null()) {
    VT_ASSIGN_OR_RETURN(c.replay_loss, r.real("replay_loss"));
  }
  VT_ASSIGN_OR_RETURN(c.loss_verified, r.flag("loss_verified"));
  VT_ASSIGN_OR_RETURN(c.trail_verified, r.flag("trail_verified"));
  VT_ASSIGN_OR_RETURN(const json* claimed_eval, r.at("claimed_eval"));
  VT_ASSIGN_OR_RETURN(c.claimed_eval, eval_claim_from(*claimed_eval, w + ".claimed_eval"));
  VT_ASSIGN_OR_RETURN(const json* replay_eval, r.at("replay_eval"));
  VT_ASSIGN_OR_RETURN(c.replay_eval, eval_claim_from(*replay_eval, w + ".replay_eval"));
  VT_ASSIGN_OR_RETURN(c.eval_status, r.text("eval_status"));
  if (c.eval_status != "claimed" && c.eval_status != "verified" &&
      c.eval_status != "within_tolerance") {
    return r.error("eval_status", "\"claimed\", \"verified\" or \"within_tolerance\"");
  }
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
  Reader r(j, file.string());
  VT_ASSIGN_OR_RETURN(std::string format, r.text("format"));
  if (format != kVerifyStateFormat)
    return r.error("format", std::string(kVerifyStateFormat).insert(0, 1, '"') + '"');
  sweep_temp_files(dir);
  VerifyState s;
  VT_ASSIGN_OR_RETURN(s.task_id, r.text("task_id"));
  VT_ASSIGN_OR_RETURN(s.log_head, r.text("log_head"));
  VT_ASSIGN_OR_RETURN(s.seed_hex, r.text("seed"));
  VT_ASSIGN_OR_RETURN(s.seed_given, r.flag("seed_given"));
  VT_ASSIGN_OR_RETURN(const json* policy, r.at("policy"));
  VT_ASSIGN_OR_RETURN(s.policy, policy_from(*policy, file.string() + ": policy"));
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
