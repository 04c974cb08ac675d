// Test helper: restores a snapshot in a fresh process, trains one epoch, writes the result.
// Replays must not share memory with the run they check (an optimizer that loads state can end
// up aliasing the original's tensors and hide a broken replay), so tests run this as a child.
//
//   replay_tool TASK.json SNAPSHOT_IN SNAPSHOT_OUT [THREADS]
#include <cstdio>
#include <cstdlib>

#include "common/file_io.h"
#include "training/trainer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: replay_tool TASK.json SNAPSHOT_IN SNAPSHOT_OUT [THREADS]\n");
    return 2;
  }
  auto fail = [](const vt::Error& e) {
    std::fprintf(stderr, "replay_tool: %s\n", e.message.c_str());
    return vt::exit_code(e.code);
  };
  auto task = vt::load_task(argv[1]);
  if (!task) return fail(task.error());
  auto snapshot = vt::read_file(argv[2]);
  if (!snapshot) return fail(snapshot.error());
  vt::training::TrainerOptions options;
  if (argc > 4) options.intra_op_threads = std::atoll(argv[4]);
  auto trainer = vt::training::Trainer::restore(*task, *snapshot, options);
  if (!trainer) return fail(trainer.error());
  for (const std::string& note : (*trainer)->replay_notes())
    std::fprintf(stderr, "note: %s\n", note.c_str());
  auto summary = (*trainer)->train_epoch();
  if (!summary) return fail(summary.error());
  auto after = (*trainer)->snapshot();
  if (!after) return fail(after.error());
  auto written = vt::write_file_atomic(argv[3], *after);
  if (!written) return fail(written.error());
  return 0;
}
