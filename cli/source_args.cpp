#include "cli/source_args.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <filesystem>
#include <thread>

#include "cli/service.h"
#include "common/file_io.h"

namespace vt::cli {
namespace fs = std::filesystem;

void add_source_options(CLI::App* cmd, SourceArgs& s) {
  auto* provider = cmd->add_option("--provider", s.provider, "The provider's service, HOST:PORT");
  auto* workdir =
      cmd->add_option("--workdir", s.workdir, "Or: the provider's workdir, read offline");
  provider->excludes(workdir);
  cmd->add_option("--token-file", s.token_file, "The provider's access token")->needs(provider);
  cmd->add_option("--pin", s.pin, "SHA-256 of the provider's TLS certificate")->needs(provider);
  cmd->add_option("--ca-file", s.ca_file, "Or: a CA that signed the provider's certificate")
      ->needs(provider);
  cmd->add_flag("--insecure", s.insecure, "Plain TCP (loopback only)")->needs(provider);
}

Result<std::unique_ptr<verifier::EvidenceSource>> open_source(
    const SourceArgs& s, std::chrono::milliseconds evidence_timeout,
    std::chrono::steady_clock::time_point deadline, bool wait_for_start) {
  if (!s.workdir.empty()) return verifier::open_workdir_source(s.workdir);
  if (s.provider.empty()) return invalid_input("give --provider HOST:PORT or --workdir DIR");
  VT_ASSIGN_OR_RETURN(auto hp, parse_host_port(s.provider, "--provider"));
  ClientConfig config;
  config.host = hp.first;
  config.port = hp.second;
  config.insecure = s.insecure;
  config.pin_sha256 = s.pin;
  config.ca_file = s.ca_file;
  config.io_timeout =
      std::min(config.io_timeout, evidence_timeout);  // one stalled frame cannot outlast it
  config.deadline = deadline;
  if (s.token_file.empty())
    return invalid_input("--provider needs --token-file (the provider's serve.token)");
  std::chrono::steady_clock::time_point wait_until{};
  if (wait_for_start) {
    wait_until = std::min(deadline, std::chrono::steady_clock::now() + evidence_timeout);
    if (!fs::exists(s.token_file))
      spdlog::info("waiting for {} (the provider writes it as it starts)", s.token_file);
    while (!fs::exists(s.token_file) && std::chrono::steady_clock::now() < wait_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // A token file that is not there is the caller's mistake (exit 2), named by its flag.
  if (Status there = check_input_file(s.token_file, "--token-file"); !there) {
    if (!wait_for_start) return there.error();
    return invalid_input(there.error().message +
                         " (the provider writes it as it starts; waited until the evidence "
                         "timeout)");
  }
  VT_ASSIGN_OR_RETURN(config.token, read_secret_file(s.token_file, 4096));
  while (!config.token.empty() && std::isspace(static_cast<unsigned char>(config.token.back())))
    config.token.pop_back();
  if (!s.insecure && s.pin.empty() && s.ca_file.empty()) {
    return invalid_input(
        "--provider over TLS needs --pin SHA256 (printed by the provider) or --ca-file");
  }
  return verifier::open_provider_source(
      config, evidence_timeout, wait_until,
      [](const std::string& n) { spdlog::info("verify: {}", n); });
}

}  // namespace vt::cli
