#pragma once
// The root (operand_root) of every operand of a step, at a fraction of the hashing: a step hands
// the same values from call to call (an output is the next call's input; a weight is read forward
// and backward), so about half of a gpt step's operand bytes are values already hashed in that
// step. A repeat is found by a fast non-cryptographic key and confirmed byte for byte against a
// copy kept of the first occurrence, so a crafted key collision can only cost time, never a wrong
// digest. What is new is hashed by one helper thread while the step goes on, and by the caller
// too once it waits.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"
#include "common/thread_pool.h"

namespace vt::dispute {

class OperandDigests {
 public:
  // memo_bytes: how much of the operands' values may be kept to recognise repeats; past it every
  // operand is hashed at once on the caller's thread. background: hash on a helper thread.
  explicit OperandDigests(std::size_t memo_bytes, bool background);
  ~OperandDigests();
  OperandDigests(const OperandDigests&) = delete;
  OperandDigests& operator=(const OperandDigests&) = delete;

  // A ticket for the digest of `bytes` (read now: the caller may overwrite them after).
  using Ticket = std::size_t;
  Ticket add(ByteSpan bytes);
  // Waits for every digest; valid until the next add.
  void finish();
  const Digest& digest(Ticket t) const;
  // Whether `t`'s digest is computed already (digest(t) may be read without finish()).
  bool ready(Ticket t) const;
  // No digest not yet begun will be computed: the caller reads only those ready now.
  void abandon() { abandoned_.store(true); }

  std::size_t hashed_bytes() const { return hashed_bytes_; }
  std::size_t repeated_bytes() const { return repeated_bytes_; }

 private:
  struct Entry {
    Bytes copy;  // the values, to know a repeat by (none past the memo's budget)
    Digest digest{};
    std::atomic<bool> claimed{false};
    std::atomic<bool> done{false};  // digest written
  };
  void hash_entry(Entry& e);

  std::size_t memo_bytes_, kept_bytes_ = 0;
  std::size_t hashed_bytes_ = 0, repeated_bytes_ = 0;
  std::deque<Entry> entries_;                                   // stable addresses
  std::vector<std::size_t> tickets_;                            // ticket → entry
  std::unordered_multimap<std::uint64_t, std::size_t> by_key_;  // key → kept entry
  std::atomic<bool> abandoned_{false};
  std::optional<ThreadPool> helper_;
  std::vector<std::future<void>> pending_;
};

}  // namespace vt::dispute
