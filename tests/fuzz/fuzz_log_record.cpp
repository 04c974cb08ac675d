// libFuzzer target for the commitment log reader (protocol/log.h): decode_record on one line
// and read_log on a whole file accept or refuse with an error, never crash. A line that decodes
// re-encodes to the same bytes (the record hash is taken over the stored line, so decode must
// not accept two spellings of one record).

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "protocol/log.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vt::ByteSpan input(data, size);
  auto record = vt::decode_record(input, "fuzz");
  if (record.ok()) {
    vt::Bytes again = vt::encode_record(*record);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
    (void)vt::verify_record(*record, record->record.epoch, record->record.task_id,
                            record->record.prev, std::nullopt);
  }
  auto log = vt::read_log(input, "fuzz");
  if (log.ok()) {
    std::uint64_t covered = 0;
    for (const auto& r : log->records) covered += vt::encode_record(r).size();
    if (log->torn_tail) covered += log->torn_tail->size;
    if (covered != size) std::abort();
    if (!log->records.empty())
      (void)vt::verify_log(log->records, log->records.front().record.task_id);
  }
  return 0;
}
