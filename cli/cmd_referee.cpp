// `veritrain referee`: anyone handed operator evidence (docs/dispute.md) rules on it alone - no
// task, no workdir, no LibTorch: the evidence's one operator call is recomputed with kernels/.
#include "cli/app.h"
#include "common/file_io.h"
#include "dispute/referee.h"
#include "verifier/audit/ruling_page.h"

namespace vt::cli {
namespace {

// Exit 0: the provider's outputs are the documented result; 1: they are not; 2: the evidence
// does not hold (malformed, a signature or a hash that does not check), so there is no ruling.
struct RefereeArgs {
  std::string file, report;
};

Result<int> run_referee(Context& ctx, const RefereeArgs& a) {
  const std::string& file = a.file;
  VT_RETURN_IF_ERROR(check_input_file(file, "evidence"));
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(file, dispute::kMaxValuesText));
  auto checked = dispute::read_operator_evidence(text, file);
  if (!checked) {
    return invalid_input("no ruling: " + checked.error().message);
  }
  VT_ASSIGN_OR_RETURN(dispute::Ruling ruling, dispute::rule(checked->evidence));
  nlohmann::json j = dispute::ruling_to_json(ruling, checked->evidence);
  j["ok"] = ruling.provider_correct;
  j["auditor"] = checked->auditor_fingerprint;
  std::string report;
  if (!a.report.empty()) {
    VT_RETURN_IF_ERROR(verifier::write_ruling_page(a.report, ruling, checked->evidence,
                                                   {file, checked->auditor_fingerprint}));
    report = (std::filesystem::path(a.report) / "report.html").string();
    j["report"] = report;
  }
  emit(ctx, j,
       "ruling " + ruling.summary + "\nprovider key " + checked->evidence.provider.fingerprint() +
           "\nauditor key " + checked->auditor_fingerprint + "\n" +
           (report.empty() ? "" : "report: " + report + "\n"));
  return ruling.provider_correct ? 0 : exit_code(Errc::kRejected);
}

}  // namespace

void register_referee(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<RefereeArgs>();
  auto* cmd = app.add_subcommand("referee", summary_of("referee"));
  cmd->add_option("evidence", a->file, "Operator evidence written by `veritrain dispute`")
      ->required();
  cmd->add_option("--report", a->report,
                  "Folder for report.html: the ruling as a page an arbiter reads");
  cmd->callback([&ctx, a] { ctx.action = [&ctx, a] { return run_referee(ctx, *a); }; });
}

}  // namespace vt::cli
