#include "cli/command_table.h"

#include <cstdio>
#include <cstdlib>

namespace vt::cli {

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      {"keygen", "Create an Ed25519 signing key and a TLS certificate", Runs::kLight},
      {"task", "Write or show a task (what to train, how, for how long)", Runs::kLight},
      {"task init", "Write a valid task with sensible defaults to stdout (or --out)",
       Runs::kLightForZoo},
      {"task show", "Check a task file and print it with its task_id", Runs::kLight},
      {"task check",
       "Check a task before anyone pays: model against data, and its first steps trained in "
       "two fresh processes",
       Runs::kTorch},
      {"estimate", "Measure a task's state size and one step's peak memory and time", Runs::kTorch},
      {"train", "Run a task as a provider: train, commit every epoch, store snapshots",
       Runs::kTorch},
      {"log", "Check a provider's commitment log and stored snapshots", Runs::kLight},
      {"log verify", "Signatures, chain, task binding, and every snapshot against its root",
       Runs::kLight},
      {"inspect", "Describe a workdir, task, log, snapshot or snapshot container", Runs::kLight},
      {"serve", "Serve a provider workdir over TLS until interrupted", Runs::kLight},
      {"verify", "Challenge random epochs, replay them, and judge the provider", Runs::kTorch},
      {"audit", "Replay a disputed epoch offline and write signed evidence", Runs::kTorch},
      {"trace",
       "Answer for one step as a provider: its signed operator trace, or one call's values",
       Runs::kTorch},
      {"dispute", "Find the one operator a disputed step comes down to; write operator evidence",
       Runs::kTorch},
      {"referee", "Rule on operator evidence by recomputing its one operator call", Runs::kLight},
      {"verdict", "Check signed verdicts", Runs::kLight},
      {"verdict check", "Check a verdict's signature, format and signer", Runs::kLight},
      {"plan", "How many checks, what they cost, and whether cheating could pay",
       Runs::kLightWithCost},
      {"export", "Write the model of a committed epoch as TorchScript and/or safetensors",
       Runs::kTorch},
      {"demo", "The whole flow on loopback: train, serve, verify online, report", Runs::kTorch},
  };
  return table;
}

std::string summary_of(std::string_view path) {
  for (const Command& c : command_table()) {
    if (c.path == path) return std::string(c.summary);
  }
  std::fprintf(stderr, "veritrain: internal error: command '%.*s' is not in command_table()\n",
               static_cast<int>(path.size()), path.data());
  std::abort();
}

const Command* find_command(std::string_view first, std::string_view second) {
  const Command* found = nullptr;
  for (const Command& c : command_table()) {
    if (c.path == first) found = found == nullptr ? &c : found;
    if (!second.empty() && c.path.size() == first.size() + 1 + second.size() &&
        c.path.starts_with(first) && c.path[first.size()] == ' ' && c.path.ends_with(second))
      return &c;
  }
  return found;
}

}  // namespace vt::cli
