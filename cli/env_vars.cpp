#include "cli/env_vars.h"

#include <string>
#include <vector>

namespace vt::cli {
namespace {

struct Binding {
  std::vector<std::string> command;  // path from the top, e.g. {"log", "verify"}
  std::string flag;
  std::string variable;
};

// The verifier's side: where the provider is reached and whom to trust. The provider's own
// --token-file (train, serve) is not bound: a variable set for a verifier's scripts must not
// change which token a provider serves with.
const std::vector<Binding>& bindings() {
  static const std::vector<Binding> table = {
      {{"verify"}, "--token-file", "VERITRAIN_TOKEN_FILE"},
      {{"verify"}, "--pin", "VERITRAIN_PIN"},
      {{"verify"}, "--ca-file", "VERITRAIN_CA_FILE"},
      {{"verify"}, "--provider-key", "VERITRAIN_PROVIDER_KEY"},
      {{"audit"}, "--provider-key", "VERITRAIN_PROVIDER_KEY"},
      {{"log", "verify"}, "--provider-key", "VERITRAIN_PROVIDER_KEY"},
      {{"verify"}, "--key", "VERITRAIN_VERIFIER_KEY"},
      {{"audit"}, "--key", "VERITRAIN_VERIFIER_KEY"},
      {{"verify"}, "--report", "VERITRAIN_REPORT"},
  };
  return table;
}

CLI::App* find_command(CLI::App& app, const std::vector<std::string>& path) {
  CLI::App* at = &app;
  for (const std::string& name : path) {
    auto match = at->get_subcommands([&name](CLI::App* s) { return s->get_name() == name; });
    if (match.empty()) return nullptr;
    at = match.front();
  }
  return at;
}

}  // namespace

void bind_env_vars(CLI::App& app) {
  for (const Binding& b : bindings()) {
    CLI::App* cmd = find_command(app, b.command);
    CLI::Option* opt = cmd == nullptr ? nullptr : cmd->get_option_no_throw(b.flag);
    if (opt == nullptr) continue;  // a command this executable only lists (torch_forward.h)
    opt->envname(b.variable);
    // A variable exported once serves both sources: with --workdir, the network flags it sets
    // are unused rather than an error ("--pin requires --provider").
    if (CLI::Option* provider = cmd->get_option_no_throw("--provider"); provider != nullptr)
      opt->remove_needs(provider);
  }
}

}  // namespace vt::cli
