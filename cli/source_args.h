#pragma once
// Where a verifier's or auditor's evidence comes from: the provider's service over TLS
// (--provider, --token-file, --pin or --ca-file, --insecure on loopback) or its workdir, read
// offline (--workdir). `verify` and `dispute` share these flags.
#include <chrono>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "verifier/source/source.h"

namespace vt::cli {

struct SourceArgs {
  std::string provider, token_file, pin, ca_file, workdir;
  bool insecure = false;
};

void add_source_options(CLI::App* cmd, SourceArgs& s);

// `wait_for_start`: an online verifier may be started together with the provider (the README's
// tour as one script), so the token file and the port are waited for, bounded by
// --evidence-timeout and --deadline.
Result<std::unique_ptr<verifier::EvidenceSource>> open_source(
    const SourceArgs& s,
    std::chrono::milliseconds evidence_timeout = verifier::kDefaultEvidenceTimeout,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
    bool wait_for_start = false);

}  // namespace vt::cli
