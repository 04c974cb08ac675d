#include "provider/workdir/workdir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/file_io.h"

namespace vt::provider {
namespace fs = std::filesystem;

Workdir::Workdir(Workdir&& other) noexcept
    : dir_(std::move(other.dir_)),
      task_(std::move(other.task_)),
      task_id_(other.task_id_),
      lock_fd_(other.lock_fd_),
      swept_temp_files_(other.swept_temp_files_) {
  other.lock_fd_ = -1;
}

Workdir& Workdir::operator=(Workdir&& other) noexcept {
  if (this != &other) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    dir_ = std::move(other.dir_);
    task_ = std::move(other.task_);
    task_id_ = other.task_id_;
    lock_fd_ = other.lock_fd_;
    swept_temp_files_ = other.swept_temp_files_;
    other.lock_fd_ = -1;
  }
  return *this;
}

Workdir::~Workdir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

Result<Workdir> Workdir::open_existing(const fs::path& dir) {
  Workdir w;
  w.dir_ = dir;
  if (!fs::exists(w.task_file())) {
    return invalid_input(dir.string() + " is not a veritrain workdir (no task.json)");
  }
  VT_ASSIGN_OR_RETURN(w.task_, load_task(w.task_file().string()));
  w.task_id_ = vt::task_id(w.task_);
  return w;
}

Result<Workdir> Workdir::layout_of(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return invalid_input(dir.string() + " is not a folder (give the provider's workdir)");
  Workdir w;
  w.dir_ = dir;
  return w;
}

Result<Workdir> Workdir::open_for(const fs::path& dir, const Task& task) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("creating workdir " + dir.string() + ": " + ec.message());
  const Digest id = vt::task_id(task);
  Workdir w;
  w.dir_ = dir;
  if (fs::exists(w.task_file())) {
    Result<Workdir> existing = open_existing(dir);
    // A run that stopped before committing anything (a task this machine cannot train, a
    // device it lacks) binds the folder to nothing: the corrected task takes it over.
    std::error_code size_ec;
    const bool committed_nothing =
        !fs::exists(w.log_file()) || fs::file_size(w.log_file(), size_ec) == 0;
    if (committed_nothing && (!existing || existing->task_id_ != id)) {
      VT_RETURN_IF_ERROR(
          write_file_atomic(w.task_file(), pretty_task_json(task) + "\n", 0644, Overwrite::kAllow));
      w.task_ = task;
      w.task_id_ = id;
      return w;
    }
    if (!existing) return existing.error();
    w = std::move(*existing);
    if (w.task_id_ != id) {
      return invalid_input("workdir " + dir.string() + " holds task " + hex_encode(w.task_id_) +
                           ", not this task " + hex_encode(id) + "; use another folder");
    }
    return w;
  }
  if (fs::exists(w.log_file())) {
    return invalid_input("workdir " + dir.string() +
                         " has a commitment log but no task.json; refusing to guess");
  }
  VT_RETURN_IF_ERROR(
      write_file_atomic(w.task_file(), pretty_task_json(task) + "\n", 0644, Overwrite::kRefuse));
  w.task_ = task;
  w.task_id_ = id;
  return w;
}

Status Workdir::lock() {
  if (lock_fd_ >= 0) return {};
  const fs::path path = dir_ / "LOCK";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(errno_text(errno, "opening", path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return io_error("workdir " + dir_.string() + " is in use by another veritrain process (" +
                    path.string() + " is locked)");
  }
  lock_fd_ = fd;
  // A write killed between its temp file and the rename leaves the temp file behind (a whole
  // snapshot's worth, for a container); whoever holds the lock next clears them.
  for (const fs::path& d : {dir_, snapshots_dir()}) {
    swept_temp_files_ += sweep_temp_files(d);
  }
  return {};
}

}  // namespace vt::provider
