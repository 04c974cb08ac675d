// Writes the seed corpora of tests/fuzz/corpus/{safetensors,log_record,task,evidence} from a
// tiny cheating run: real snapshots, log lines, tasks and evidence, so each fuzzer starts from
// inputs that reach deep into its parser. Usage: fuzz_seeds <tests/fuzz/corpus>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/file_io.h"
#include "protocol/log.h"
#include "tests/adversary/cheater.h"
#include "training/zoo/zoo.h"
#include "verifier/audit/audit.h"

namespace fs = std::filesystem;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_seeds: %s\n", what.c_str());
  return 1;
}

bool put(const fs::path& file, vt::ByteSpan bytes) {
  fs::create_directories(file.parent_path());
  return vt::write_file_atomic(file, bytes).ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: fuzz_seeds <corpus dir>");
  const fs::path out = argv[1];
  const fs::path work = fs::temp_directory_path() / ("vt-fuzz-seeds-" + std::to_string(::getpid()));
  fs::remove_all(work);
  auto t = vt::training::default_task("mlp", "synthetic");
  if (!t) return fail(t.error().message);
  vt::Task task = *t;
  task.model.options = {{"input_dim", 2}, {"hidden", 3}, {"layers", 1}, {"classes", 2}};
  task.dataset.options = {{"samples", 16}, {"input_dim", 2}, {"classes", 2}};
  task.epochs = 2;
  task.steps_per_epoch = 2;
  task.batch_size = 4;
  task.fingerprint = {8, 8, 1};
  vt::adversary::CheatPlan plan;
  plan.cheats[2] = vt::adversary::Strategy::kLearningRate;
  auto key = vt::SigningKey::generate();
  if (!key) return fail(key.error().message);
  auto run = vt::adversary::write_workdir(task, work, plan, *key);
  if (!run) return fail(run.error().message);
  auto source = vt::verifier::open_workdir_source(work);
  if (!source) return fail(source.error().message);
  (*source)->set_limits(vt::verifier::limits_for(task));

  for (std::uint64_t e = 0; e < run->roots.size(); ++e) {
    auto bytes = (*source)->snapshot(e, run->roots[e], std::nullopt);
    if (!bytes ||
        !put(out / "safetensors" / ("epoch" + std::to_string(e) + ".safetensors"), *bytes)) {
      return fail("snapshot " + std::to_string(e));
    }
  }
  auto log_bytes = vt::read_file(work / "commitments.log");
  auto records = (*source)->log();
  if (!log_bytes || !records) return fail("log");
  put(out / "log_record" / "whole.log", *log_bytes);
  for (const auto& r : *records) {
    put(out / "log_record" / ("epoch" + std::to_string(r.record.epoch) + ".line"),
        vt::encode_record(r));
  }
  put(out / "task" / "pretty.json", vt::as_bytes(vt::pretty_task_json(task)));
  put(out / "task" / "canonical.json", vt::as_bytes(vt::canonical_task_json(task)));
  task.determinism = vt::Determinism::kTolerance;
  task.tolerance = {1e-6, 1e-5, 1e-4, 0.01};
  task.model = {
      "gpt", {{"vocab", 16}, {"d_model", 8}, {"layers", 1}, {"heads", 2}, {"seq_len", 4}}, "", ""};
  task.dataset.options = {{"samples", 8}};
  task.optimizer = {.name = "adamw", .lr = 3e-3, .weight_decay = 0.01, .beta2 = 0.95};
  task.schedule = {"cosine", 1, 0.1, 3e-4, 8};
  put(out / "task" / "gpt_tolerance.json", vt::as_bytes(vt::pretty_task_json(task)));

  task = *t;
  task.model.options = {{"input_dim", 2}, {"hidden", 3}, {"layers", 1}, {"classes", 2}};
  task.dataset.options = {{"samples", 16}, {"input_dim", 2}, {"classes", 2}};
  task.epochs = 2;
  task.steps_per_epoch = 2;
  task.batch_size = 4;
  task.fingerprint = {8, 8, 1};
  for (std::uint64_t e : {1, 2}) {
    auto finding = vt::verifier::audit_epoch(**source, task, e, {});
    if (!finding) return fail(finding.error().message);
    auto evidence =
        vt::verifier::make_evidence(*finding, task, (*records)[e - 1], (*records)[e], *key);
    if (!evidence) return fail(evidence.error().message);
    put(out / "evidence" / ("epoch" + std::to_string(e) + ".json"), vt::as_bytes(*evidence));
  }
  fs::remove_all(work);
  std::printf("seeds written under %s\n", out.c_str());
  return 0;
}
