#pragma once
// The committed arithmetic environment, from the verifier's side (docs/environment.md): which
// environments a log may commit, matching this process to the provider's before any replay,
// and what would judge a run this machine cannot reproduce.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "protocol/environment.h"
#include "protocol/log.h"
#include "training/environment.h"
#include "verifier/source/source.h"

namespace vt::verifier {

// Reads the provider's epoch-0 record (online: waits up to `wait` for it) and matches this
// process to the environment it commits (training::match_environment), so that every replay,
// here or in a child process, runs at the provider's levels. Call it before anything in this
// process runs a LibTorch kernel. nullopt when there is no readable epoch 0 or it commits no
// environment: the log check then rejects the log for it.
Result<std::optional<training::EnvironmentMatch>> adopt_committed_environment(
    EvidenceSource& source, const Task& task, const training::TrainerOptions& trainer, bool online,
    std::chrono::milliseconds wait);

// What the log's environments must satisfy, one failure per problem, each naming the epoch:
// epoch 0 commits one; each fits the task's pin; in exact mode each later one (a resume) has
// epoch 0's conditions of exactness.
std::vector<std::string> check_committed_environments(const std::vector<SignedRecord>& records,
                                                      const Task& task);

// For an inconclusive verdict: what kind of verifier could judge the run, in words.
std::string what_would_judge(const std::vector<EnvironmentDifference>& unmatched,
                             const Environment& committed);

}  // namespace vt::verifier
