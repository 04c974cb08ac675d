#pragma once
// A provider's working folder (docs/workdir.md):
//
//   DIR/task.json                 the task, as given; its task_id binds everything below
//   DIR/commitments.log           the signed, hash-chained commitment log (docs/log.md)
//   DIR/snapshots/<root>.vtc      snapshot containers, content-addressed by Merkle root (hex)
//   DIR/keys/                     the provider's keys unless --key names another folder
//   DIR/LOCK                      held (flock) by the one process that writes here

#include <filesystem>

#include "protocol/task.h"

namespace vt::provider {

class Workdir {
 public:
  // Opens `dir`, creating it for `task` if it is new or empty. A folder that holds another
  // task is refused with both task_ids named; nothing is overwritten.
  static Result<Workdir> open_for(const std::filesystem::path& dir, const Task& task);
  // Opens an existing workdir and reads its task.
  static Result<Workdir> open_existing(const std::filesystem::path& dir);
  // The layout of `dir` without reading its task.json: for a verifier, which judges by its own
  // task and must not let a provider's broken task.json decide the outcome. task() is empty.
  static Result<Workdir> layout_of(const std::filesystem::path& dir);

  Workdir(Workdir&& other) noexcept;
  Workdir& operator=(Workdir&& other) noexcept;
  Workdir(const Workdir&) = delete;
  Workdir& operator=(const Workdir&) = delete;
  ~Workdir();

  // Takes the folder's write lock; fails at once if another process holds it. Then removes the
  // temp files of writes that were killed (common/file_io.h sweep_temp_files).
  Status lock();
  std::size_t swept_temp_files() const { return swept_temp_files_; }

  const std::filesystem::path& dir() const { return dir_; }
  const Task& task() const { return task_; }
  const Digest& task_id() const { return task_id_; }
  std::filesystem::path task_file() const { return dir_ / "task.json"; }
  std::filesystem::path log_file() const { return dir_ / "commitments.log"; }
  std::filesystem::path snapshots_dir() const { return dir_ / "snapshots"; }
  std::filesystem::path keys_dir() const { return dir_ / "keys"; }

 private:
  Workdir() = default;
  std::filesystem::path dir_;
  Task task_;
  Digest task_id_{};
  int lock_fd_ = -1;
  std::size_t swept_temp_files_ = 0;
};

}  // namespace vt::provider
