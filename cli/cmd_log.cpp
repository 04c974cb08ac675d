// `veritrain log verify`: check everything a provider stored, signatures to snapshots.
#include <filesystem>
#include <sstream>

#include "cli/app.h"
#include "cli/workdir_report.h"
#include "common/activity.h"
#include "common/file_io.h"
#include "common/safetensors.h"
#include "common/text.h"
#include "compression/container.h"
#include "protocol/log.h"
#include "protocol/task.h"
#include "provider/check.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "verifier/check/log_check.h"
#include "verifier/check/provider_key.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

}  // namespace

void register_log(CLI::App& app, Context& ctx) {
  auto* log = app.add_subcommand("log", summary_of("log"));
  log->require_subcommand(1);
  struct VerifyArgs {
    std::string dir, provider_key;
  };
  auto v = std::make_shared<VerifyArgs>();
  auto* verify = log->add_subcommand("verify", summary_of("log verify"));
  verify->add_option("--workdir", v->dir, "The provider's workdir")->required();
  verify->add_option("--provider-key", v->provider_key,
                     "The provider's signing.pub.pem or its key's SHA-256: a log signed by any "
                     "other key is rejected");
  verify->callback([&ctx, v] {
    ctx.action = [&ctx, v]() -> Result<int> {
      std::optional<std::string> pinned;
      if (!v->provider_key.empty()) {
        VT_ASSIGN_OR_RETURN(pinned, verifier::parse_provider_key(v->provider_key));
      }
      VT_ASSIGN_OR_RETURN(provider::WorkdirReport r, provider::check_workdir(v->dir));
      if (pinned && r.signer_fingerprint != *pinned) {
        return rejected(v->dir + ": the log is signed by key " + r.signer_fingerprint +
                        ", not by the provider key given with --provider-key (" + *pinned + ")");
      }
      nlohmann::json j = report_json(r);
      j["signer_pinned"] = pinned.has_value();
      const std::string signer = pinned ? ", signed by the pinned provider key"
                                        : " (signer not pinned: give --provider-key)";
      // Unusable snapshots are findings about the workdir, all of them, on stdout: not an error.
      const std::vector<std::string> unusable = provider::unusable_snapshots(r);
      j["ok"] = unusable.empty();
      if (unusable.empty()) {
        emit(ctx, j, report_text(r) + "log and snapshots verified" + signer + "\n");
        return 0;
      }
      j["unusable"] = unusable;
      std::string text = report_text(r) + "the log checks out" + signer + "; " +
                         std::to_string(unusable.size()) + " of " +
                         std::to_string(r.epochs.size()) + " committed snapshots are unusable:\n";
      for (const std::string& u : unusable) text += "  " + u + "\n";
      emit(ctx, j, text);
      return exit_code(Errc::kRejected);
    };
  });
}

}  // namespace vt::cli
