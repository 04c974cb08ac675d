#include "verifier/audit/second_opinion.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/process.h"
#include "fingerprint/merkle.h"

namespace vt::verifier {
namespace fs = std::filesystem;
namespace {

constexpr int kReferenceNotCovered = 3;  // replay_ref.py's exit status for a task it does not cover

// The scratch folder is named like ReplayJobs' ("veritrain-replay-<pid>-"), so a later verifier
// sweeps it if this process is killed before it removes it.
class Scratch {
 public:
  static Result<Scratch> make() {
    std::string pattern =
        (fs::temp_directory_path() / ("veritrain-replay-" + std::to_string(::getpid()) + "-XXXXXX"))
            .string();
    if (::mkdtemp(pattern.data()) == nullptr)
      return io_error(errno_text(errno, "creating", pattern));
    return Scratch(fs::path(pattern));
  }
  Scratch(Scratch&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  Scratch& operator=(Scratch&&) = delete;
  ~Scratch() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit Scratch(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

std::string tail(const std::string& text) {
  constexpr std::size_t kKeep = 1500;
  return text.size() > kKeep ? "..." + text.substr(text.size() - kKeep) : text;
}

}  // namespace

Result<SecondOpinion> second_opinion(const std::string& task_json, ByteSpan before,
                                     const Digest& veritrain_root,
                                     const SecondOpinionOptions& options) {
  if (!fs::is_regular_file(options.script)) {
    return invalid_input("--second-opinion: the reference " + options.script.string() +
                         " does not exist (--reference FILE)");
  }
  VT_ASSIGN_OR_RETURN(Scratch scratch, Scratch::make());
  const fs::path task = scratch.path() / "task.json", in = scratch.path() / "before.safetensors",
                 out = scratch.path() / "after.safetensors", log = scratch.path() / "reference.log";
  VT_RETURN_IF_ERROR(write_file_atomic(task, task_json));
  VT_RETURN_IF_ERROR(write_file_atomic(in, before));
  std::vector<std::string> argv{options.python.string(), options.script.string()};
  if (!options.data_dir.empty()) {
    std::error_code ec;
    const fs::path dir = fs::absolute(options.data_dir, ec);
    if (ec)
      return io_error("--second-opinion: the data folder " + options.data_dir.string() + ": " +
                      ec.message());
    argv.insert(argv.end(), {"--data-dir", dir.string()});
  }
  argv.insert(argv.end(), {task.string(), in.string(), out.string()});
  VT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(argv, log));
  const int status = child.wait();
  auto output = read_text_file(log);
  const std::string said = output ? tail(*output) : std::string();
  SecondOpinion s;
  if (status == kReferenceNotCovered) {
    s.status = "not_covered";
    s.detail = said;
    while (!s.detail.empty() && s.detail.back() == '\n') s.detail.pop_back();
    return s;
  }
  if (status != 0) {
    return internal_error("--second-opinion: " + options.python.string() + " " +
                          options.script.string() + " exited with status " +
                          std::to_string(status) + ": " + said);
  }
  VT_ASSIGN_OR_RETURN(Bytes after, read_file(out));
  s.reference_root = fp::merkle_root(after);
  s.status = s.reference_root == veritrain_root ? "agrees" : "disagrees";
  return s;
}

nlohmann::json second_opinion_to_json(const SecondOpinion& s) {
  const bool ran = s.status != "not_covered";
  return {{"status", s.status},
          {"reference", "reference/replay_ref.py"},
          {"reference_root",
           ran ? nlohmann::json(hex_encode(s.reference_root)) : nlohmann::json(nullptr)},
          {"detail", s.detail}};
}

}  // namespace vt::verifier
