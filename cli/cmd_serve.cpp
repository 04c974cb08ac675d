// `veritrain serve`: serve an existing workdir to verifiers and auditors.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/app.h"
#include "cli/service.h"

namespace vt::cli {

void register_serve(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("serve", summary_of("serve"));
  auto workdir = std::make_shared<std::string>();
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("--workdir", *workdir, "The provider's workdir")->required();
  add_serve_options(cmd, *a, /*listen_required=*/true);
  cmd->add_option(
      "--key", a->key_dir,
      "Key folder (veritrain keygen) whose TLS certificate to serve; default: the workdir's keys");
  cmd->callback([&ctx, workdir, a] {
    ctx.action = [&ctx, workdir, a]() -> Result<int> {
      block_termination_signals();
      VT_ASSIGN_OR_RETURN(Service service, start_service(*workdir, *a));
      const Endpoint ep = service.server->endpoint();
      emit(ctx, {{"listening", ep.host + ":" + std::to_string(ep.port)}, {"workdir", *workdir}},
           "listening on " + ep.host + ":" + std::to_string(ep.port) + "; Ctrl-C stops\n");
      int sig = wait_for_termination_signal();
      spdlog::info("signal {}, stopping", sig);
      return 0;
    };
  });
}

}  // namespace vt::cli
