#pragma once
// What `verify` and `audit` share: the verifier's own signing key, and the provider key a
// requestor pinned (docs/verifier.md, "Trust").
#include <optional>
#include <string>

#include "common/result.h"
#include "protocol/keys.h"
#include "protocol/task.h"
#include "verifier/source/source.h"

namespace vt::cli {

// The verifier's (or auditor's) key in `key_dir`, or in $XDG_CONFIG_HOME/veritrain/verifier
// when it is empty; made (0700) on first use, so that every later verdict names one key.
Result<SigningKey> verifier_key(const std::string& key_dir);

// --provider-key, parsed: a signing.pub.pem or a key's SHA-256. Empty: nothing pinned (warned
// about under `command`'s name, since the verdict then says so).
Result<std::optional<std::string>> pinned_provider_key(const std::string& arg, const char* command);

// The log's signer against the pinned key, for commands that read a log without check_log.
Status check_log_signer(verifier::EvidenceSource& source, const Task& task,
                        const std::optional<std::string>& pinned);

}  // namespace vt::cli
