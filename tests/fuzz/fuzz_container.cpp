// libFuzzer target for the container decoder (built with -DVT_BUILD_FUZZ=ON and clang):
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DVT_BUILD_FUZZ=ON
//   -DVT_SANITIZE="address;undefined" cmake --build build-fuzz --target fuzz_container
//   build-fuzz/tests/fuzz/fuzz_container tests/fuzz/corpus/container -max_len=65536
// Checksums would stop almost every mutation at the header, so each input is also decoded after
// its header and payload checksums are recomputed: that lets mutations reach the table checks,
// the frame decoders and the transforms. Any outcome but a crash, a leak or a sanitizer report
// is a pass; decoding must only ever return a value or an error. Each input is also read from a
// file as the store and the verifier read states too large to hold twice (ContainerFile, a
// section at a time, its delta base all zeros).

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "compression/container.h"
#include "compression/format.h"
#include "compression/streaming.h"

namespace {

using vt::Bytes;
using vt::ByteSpan;
namespace format = vt::comp::format;

// Recomputes every checksum of `c` that its own table lets us find; leaves the rest alone.
void fix_checksums(Bytes& c) {
  if (c.size() < format::kHeaderSize) return;
  std::uint64_t table_size = vt::get_u64le(c.data() + 24);
  if (table_size > c.size() - format::kHeaderSize) return;
  std::uint32_t count = vt::get_u32le(c.data() + 12);
  std::uint64_t at = format::kHeaderSize, payload = format::kHeaderSize + table_size;
  for (std::uint32_t i = 0; i < count && at + format::kEntryFixedSize <= payload; ++i) {
    std::uint8_t* e = c.data() + at;
    std::uint64_t size = vt::get_u64le(e + 16);
    if (size > c.size() - payload) break;
    vt::put_u64le(e + 40, format::xxh3(ByteSpan(c).subspan(payload, size)));
    payload += size;
    at += format::kEntryFixedSize + (e[2] | (e[3] << 8));
  }
  Bytes covered(c.begin(), c.begin() + format::kHeaderChecksumOffset);
  covered.insert(covered.end(), c.begin() + format::kHeaderSize,
                 c.begin() + format::kHeaderSize + table_size);
  vt::put_u64le(c.data() + format::kHeaderChecksumOffset, format::xxh3(covered));
}

void exercise(ByteSpan input) {
  vt::comp::DecodeOptions options;
  options.max_expansion = 64;   // keeps libFuzzer's memory limit meaningful
  options.verify_root = false;  // a fuzzed root never matches; the sections are what is tested
  (void)vt::comp::decode(input, options);
  auto info = vt::comp::read_container_info(input);
  if (info.ok() && !info->sections.empty()) (void)vt::comp::extract_section(input, 0);
}

void exercise_file(ByteSpan input) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("vt-fuzz-container-" + std::to_string(::getpid()) + ".vtc");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(input.data()),
              static_cast<std::streamsize>(input.size()));
  }
  auto file = vt::comp::ContainerFile::open(path, std::uint64_t{16} << 20);
  if (file.ok()) {
    (*file)->set_base([](std::uint64_t, std::span<std::uint8_t> out) {
      std::fill(out.begin(), out.end(), std::uint8_t{0});
      return vt::Status{};
    });
    (void)vt::comp::read_whole(**file, nullptr);
    (void)vt::comp::check_whole(**file, nullptr);
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteSpan input(data, size);
  exercise(input);
  exercise_file(input);
  Bytes fixed(input.begin(), input.end());
  fix_checksums(fixed);
  exercise(fixed);
  exercise_file(fixed);
  return 0;
}
