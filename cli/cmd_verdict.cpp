// `veritrain verdict check`: anyone handed a verdict.json checks that it is well-formed and
// signed by the verifier it names, before acting on it.
#include "cli/app.h"
#include "common/file_io.h"
#include "verifier/check/provider_key.h"
#include "verifier/report/verdict.h"

namespace vt::cli {
namespace {

struct VerdictCheckArgs {
  std::string file, signer;
};

// Exit 0 when the file is a well-formed verdict signed as it says (and by --signer when given),
// whatever the verdict's own result; 1 for a bad signature or another signer; 2 for a malformed
// file.
Result<int> run_verdict_check(Context& ctx, const VerdictCheckArgs& a) {
  std::optional<std::string> expected;
  if (!a.signer.empty()) {
    VT_ASSIGN_OR_RETURN(std::string fp, verifier::parse_provider_key(a.signer, "--signer"));
    expected = fp;
  }
  VT_RETURN_IF_ERROR(check_input_file(a.file, "verdict"));
  VT_ASSIGN_OR_RETURN(verifier::CheckedVerdict v, verifier::verify_verdict_file(a.file));
  const std::string signer = v.signer.fingerprint();
  if (expected && signer != *expected) {
    return rejected(a.file + ": signed by " + signer + ", not by the expected verifier key " +
                    *expected);
  }
  const std::string& result = v.result;
  emit(ctx,
       {{"ok", true},
        {"signer", signer},
        {"signer_expected", expected.has_value()},
        {"result", result},
        {"task_id", v.task_id},
        {"provider_key", v.provider_key},
        {"provider_key_pinned", v.provider_key_pinned}},
       a.file + ": signature and format check out\nsigned by verifier key " + signer +
           (expected ? " (as expected)" : " (not compared: give --signer)") + "\nresult " + result +
           " for task " + v.task_id + "\nprovider key " + v.provider_key +
           (v.provider_key_pinned ? " (pinned)" : " (not pinned)") + "\n");
  return 0;
}

}  // namespace

void register_verdict(CLI::App& app, Context& ctx) {
  auto vc = std::make_shared<VerdictCheckArgs>();
  auto* verdict = app.add_subcommand("verdict", summary_of("verdict"));
  verdict->require_subcommand(1);
  auto* check = verdict->add_subcommand("check", summary_of("verdict check"));
  check->add_option("file", vc->file, "A verdict.json written by verify")->required();
  check->add_option("--signer", vc->signer,
                    "The verifier key that must have signed it: SHA-256 or signing.pub.pem");
  check->callback([&ctx, vc] { ctx.action = [&ctx, vc] { return run_verdict_check(ctx, *vc); }; });
}

}  // namespace vt::cli
