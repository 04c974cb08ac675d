// `veritrain referee`: anyone handed operator evidence (docs/dispute.md) rules on it alone - no
// task, no workdir, no LibTorch: the evidence's one operator call is recomputed with kernels/.
#include "cli/app.h"
#include "common/file_io.h"
#include "dispute/referee.h"

namespace vt::cli {
namespace {

// Exit 0: the provider's outputs are the documented result; 1: they are not; 2: the evidence
// does not hold (malformed, a signature or a hash that does not check), so there is no ruling.
Result<int> run_referee(Context& ctx, const std::string& file) {
  VT_RETURN_IF_ERROR(check_input_file(file, "evidence"));
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(file));
  auto checked = dispute::read_operator_evidence(text, file);
  if (!checked) {
    return invalid_input("no ruling: " + checked.error().message);
  }
  VT_ASSIGN_OR_RETURN(dispute::Ruling ruling, dispute::rule(checked->evidence));
  nlohmann::json j = dispute::ruling_to_json(ruling, checked->evidence);
  j["ok"] = ruling.provider_correct;
  j["auditor"] = checked->auditor_fingerprint;
  emit(ctx, j,
       "ruling " + ruling.summary + "\nprovider key " + checked->evidence.provider.fingerprint() +
           "\nauditor key " + checked->auditor_fingerprint + "\n");
  return ruling.provider_correct ? 0 : exit_code(Errc::kRejected);
}

}  // namespace

void register_referee(CLI::App& app, Context& ctx) {
  auto file = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("referee", summary_of("referee"));
  cmd->add_option("evidence", *file, "Operator evidence written by `veritrain dispute`")
      ->required();
  cmd->callback([&ctx, file] { ctx.action = [&ctx, file] { return run_referee(ctx, *file); }; });
}

}  // namespace vt::cli
