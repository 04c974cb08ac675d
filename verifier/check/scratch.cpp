#include "verifier/check/scratch.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "common/file_io.h"
#include "compression/streaming.h"

namespace vt::verifier {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kScratchPrefix = "veritrain-replay-";

void remove_abandoned_scratch(const fs::path& tmp) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kScratchPrefix, 0) != 0) continue;
    const std::string rest = name.substr(kScratchPrefix.size());
    const long owner = std::strtol(rest.c_str(), nullptr, 10);
    if (owner <= 0 || (::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH)) {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
}

}  // namespace

Result<std::shared_ptr<ScratchFolder>> ScratchFolder::create() {
  const fs::path tmp = fs::temp_directory_path();
  remove_abandoned_scratch(tmp);
  std::string pattern =
      (tmp / (std::string(kScratchPrefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return io_error(errno_text(errno, "creating", pattern));
  return std::shared_ptr<ScratchFolder>(new ScratchFolder(fs::path(pattern)));
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

fs::path ScratchFolder::fresh_name(const std::string& stem, const std::string& suffix) {
  return path_ / (stem + "-" + std::to_string(next_++) + suffix);
}

Status ScratchFolder::write(const fs::path& file, ByteSpan bytes) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return io_error(errno_text(errno, "writing", file));
  return {};
}

Result<std::shared_ptr<const StateFile>> StateFile::adopt(std::shared_ptr<ScratchFolder> folder,
                                                          const fs::path& file,
                                                          const Digest& root) {
  auto opened = PositionalFile::open(file);
  if (!opened) {
    std::error_code ignored;
    fs::remove(file, ignored);
    return opened.error();
  }
  std::shared_ptr<StateFile> state(new StateFile(std::move(folder), std::move(*opened), root));
  // The file is this verifier's own (a replay's output), but it is read back by offsets from its
  // header, so the header is bounded and checked like any other.
  auto view = comp::read_layout(state->size(), [&](std::uint64_t at, std::span<std::uint8_t> out) {
    return state->read(at, out);
  });
  if (!view)
    return internal_error(file.string() + ": not a canonical state: " + view.error().message);
  state->tensors_ = std::move(view->tensors);
  state->data_start_ = view->data_start;
  return std::shared_ptr<const StateFile>(std::move(state));
}

StateFile::~StateFile() {
  std::error_code ignored;
  fs::remove(file_.path(), ignored);
}

Result<Bytes> StateFile::read_all() const {
  Bytes bytes(size());
  VT_RETURN_IF_ERROR(read(0, bytes));
  return bytes;
}

Result<fp::Fingerprint> StateFile::gather(const fp::SamplePlan& plan) const {
  return fp::gather(plan, tensors_,
                    [&](const TensorEntry& e, std::uint64_t at, std::span<std::uint8_t> out) {
                      return read(data_start_ + e.begin + at, out);
                    });
}

}  // namespace vt::verifier
