#pragma once
// `verify --resume DIR` (docs/verifier.md, "Resuming"): what an offline verify keeps on disk so
// that an interrupted run continues with the same sealed challenges and without replaying the
// epochs it already judged.
//
//   DIR/.verify-state/            0700
//     state.json                  0600  {"format":"veritrain.verify-state.v3","task_id":hex,
//                                        "log_head":hex,"seed":hex,"seed_given":bool,"policy":{...}}
//     epoch-<E>.json              0600  one judged epoch, written when its result is known
//
// The seed is the challenge randomness: with the same log it draws the same epochs, and it is
// sealed: only the verifier reads this folder, and `verify` removes it once the verdict is
// written (a provider that learned the seed could predict a resumed run's challenges). Every
// file is written atomically (temp + fsync + rename), so a kill leaves each either whole or
// absent. Written by the verifier itself, but read back with the same care as any input.

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "verifier/check/epoch_check.h"
#include "verifier/policy/policy.h"

namespace vt::verifier {

// v2: held-out metrics; v3: comparisons in the schema of verdicts (fp::comparison_to_json).
inline constexpr std::string_view kVerifyStateFormat = "veritrain.verify-state.v3";

struct VerifyState {
  std::string task_id;      // hex
  std::string log_head;     // hex: a resumed run must judge the same log
  std::string seed_hex;     // the challenge seed
  bool seed_given = false;  // from --seed (then the verdict records it), else secret
  PolicyRequest policy;
  std::map<std::uint64_t, EpochCheck> checks;  // already judged, by epoch
};

// The folder inside a report folder.
std::filesystem::path state_dir(const std::filesystem::path& report_dir);

// Creates the folder (0700) and writes state.json, replacing an older one and its epoch files.
Status begin_state(const std::filesystem::path& dir, const VerifyState& state);
// Writes epoch-<E>.json for one judged epoch.
Status save_check(const std::filesystem::path& dir, const EpochCheck& check);
// Reads state.json and every epoch file. Errors (invalid input) name the file and the field.
Result<VerifyState> load_state(const std::filesystem::path& dir);

// An EpochCheck as stored here, and back; a number that was not finite is null and reads back as
// NaN, as in verdicts.
nlohmann::json epoch_check_to_json(const EpochCheck& check);
Result<EpochCheck> epoch_check_from_json(const nlohmann::json& j, std::string_view where);

}  // namespace vt::verifier
