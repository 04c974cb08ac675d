#include "dispute/operand_digests.h"

#include <xxhash.h>

#include <cstring>

#include "dispute/step_trace.h"

namespace vt::dispute {

OperandDigests::OperandDigests(std::size_t memo_bytes, bool background) : memo_bytes_(memo_bytes) {
  if (background) helper_.emplace(1);
}

OperandDigests::~OperandDigests() = default;

void OperandDigests::hash_entry(Entry& e) {
  bool expected = false;
  if (!e.claimed.compare_exchange_strong(expected, true) || abandoned_.load()) return;
  e.digest = operand_root(e.copy);
  e.done.store(true, std::memory_order_release);
}

OperandDigests::Ticket OperandDigests::add(ByteSpan bytes) {
  // Seeded with the length, so equal prefixes of different lengths part at once.
  const std::uint64_t key = XXH3_64bits_withSeed(bytes.data(), bytes.size(), bytes.size());
  const auto [first, last] = by_key_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    const Entry& kept = entries_[it->second];
    if (kept.copy.size() == bytes.size() &&
        (bytes.empty() || std::memcmp(kept.copy.data(), bytes.data(), bytes.size()) == 0)) {
      repeated_bytes_ += bytes.size();
      tickets_.push_back(it->second);
      return tickets_.size() - 1;
    }
  }
  const std::size_t index = entries_.size();
  Entry& e = entries_.emplace_back();
  hashed_bytes_ += bytes.size();
  if (kept_bytes_ + bytes.size() <= memo_bytes_) {
    e.copy.assign(bytes.begin(), bytes.end());
    kept_bytes_ += bytes.size();
    by_key_.emplace(key, index);
    if (helper_) {
      pending_.push_back(helper_->submit([this, &e] { hash_entry(e); }));
    } else {
      hash_entry(e);
    }
  } else {
    e.claimed = true;
    e.digest = operand_root(bytes);
    e.done = true;
  }
  tickets_.push_back(index);
  return tickets_.size() - 1;
}

void OperandDigests::finish() {
  // The helper takes the queue from its front; the caller, idle now, takes it from the back.
  for (auto it = entries_.rbegin(); it != entries_.rend() && !pending_.empty(); ++it)
    hash_entry(*it);
  for (auto& p : pending_) p.get();
  pending_.clear();
}

const Digest& OperandDigests::digest(Ticket t) const { return entries_[tickets_.at(t)].digest; }

bool OperandDigests::ready(Ticket t) const {
  return entries_[tickets_.at(t)].done.load(std::memory_order_acquire);
}

}  // namespace vt::dispute
