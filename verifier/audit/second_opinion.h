#pragma once
// An auditor's second opinion (docs/verifier.md, "Second opinion"): the disputed epoch replayed
// again by reference/replay_ref.py, an independent PyTorch implementation of docs/training.md,
// and its after-state's Merkle root compared with veritrain's own replay. A bug in veritrain's
// trainer makes the two disagree even where the provider's commitment and veritrain agree.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "common/result.h"

namespace vt::verifier {

struct SecondOpinionOptions {
  std::filesystem::path python = "/usr/bin/python3";  // with python3-torch and python3-numpy
  std::filesystem::path script;                       // replay_ref.py
  // The task's data folder (task file's folder / dataset.path) for a task that pins files: the
  // reference reads the task from a scratch folder, where dataset.path does not resolve.
  std::filesystem::path data_dir;
};

struct SecondOpinion {
  std::string status;       // "agrees", "disagrees" or "not_covered"
  Digest reference_root{};  // when it ran
  std::string detail;       // why not covered
};

// Replays the epoch after `before` (canonical bytes) with the reference for `task_json` (the
// task file's text). `veritrain_root` is the root of veritrain's replay of the same epoch. An
// error means the reference could not run at all (interpreter, script, or its failure).
Result<SecondOpinion> second_opinion(const std::string& task_json, ByteSpan before,
                                     const Digest& veritrain_root,
                                     const SecondOpinionOptions& options);

// {"status": ..., "reference": "reference/replay_ref.py", "reference_root": hex or null, "detail":
// ...}
nlohmann::json second_opinion_to_json(const SecondOpinion& s);

}  // namespace vt::verifier
