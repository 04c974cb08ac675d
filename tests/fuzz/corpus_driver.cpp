// Runs a fuzz target once over each input it is given, as a libFuzzer binary does with files on
// its command line, but without libFuzzer: `make test` links every target against this driver
// with the normal compiler and runs it over its checked-in seeds, so a target that stops
// compiling, linking or passing its seeds fails the build that broke it, not the next `make fuzz`.
//
//   fuzz_<name> PATH...   a file is one input; a folder gives each file under it, in name order
//
// Exit 0 when every input ran; 2 when there was nothing to run (a missing or empty corpus would
// otherwise pass without testing anything). A failing input aborts, as under libFuzzer.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
namespace fs = std::filesystem;

bool collect(const fs::path& path, std::vector<fs::path>& out) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    out.push_back(path);
    return true;
  }
  if (!fs::is_directory(path, ec)) return false;
  std::vector<fs::path> found;
  for (const auto& entry : fs::recursive_directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!collect(argv[i], inputs)) {
      std::fprintf(stderr, "%s: %s: no such file or folder\n", argv[0], argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "%s: no inputs to run (expected files or folders of seeds)\n", argv[0]);
    return 2;
  }
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "%s: %s: cannot be read\n", argv[0], path.c_str());
      return 2;
    }
    // A buffer of exactly the input's size, as libFuzzer passes it, so that an ASan build of
    // this driver catches a read past the end.
    std::vector<std::uint8_t> data(text.begin(), text.end());
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), data.size());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("%zu inputs ran\n", inputs.size());
  return 0;
}
