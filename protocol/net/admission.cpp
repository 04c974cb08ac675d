#include "protocol/net/admission.h"

#include <algorithm>

namespace vt {

std::optional<std::uint64_t> Admission::enter(const std::string& address,
                                              std::function<void()> evict) {
  const auto now = std::chrono::steady_clock::now();
  std::function<void()> victim;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    const auto same_address = [&](const Pending& p) { return p.address == address; };
    const auto from_address =
        static_cast<std::size_t>(std::count_if(pending_.begin(), pending_.end(), same_address));
    auto oldest = pending_.end();
    if (from_address >= limits_.unauthenticated_per_address) {
      oldest = std::find_if(pending_.begin(), pending_.end(), same_address);
    } else if (pending_.size() >= limits_.unauthenticated) {
      oldest = pending_.begin();
    }
    const bool full = from_address >= limits_.unauthenticated_per_address ||
                      pending_.size() >= limits_.unauthenticated;
    if (full) {
      if (oldest == pending_.end() || now - oldest->since < limits_.grace) return std::nullopt;
      victim = std::move(oldest->evict);
      pending_.erase(oldest);
    }
    id = next_id_++;
    pending_.push_back(Pending{id, address, now, std::move(evict)});
  }
  if (victim) victim();
  return id;
}

std::optional<std::string> Admission::authenticate(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it =
      std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.id == id; });
  // Pushed out meanwhile: its close is already on the way, so the hello does not count.
  if (it == pending_.end()) return "the connection was closed to make room for newer ones";
  std::string address = it->address;
  pending_.erase(it);
  if (admitted_.size() >= limits_.authenticated) {
    return "the server is at its limit of " + std::to_string(limits_.authenticated) +
           " connections; try again later";
  }
  if (per_address_[address] >= limits_.authenticated_per_address) {
    return "the server is at its limit of " + std::to_string(limits_.authenticated_per_address) +
           " connections from " + address + "; try again later";
  }
  ++per_address_[address];
  admitted_.emplace(id, std::move(address));
  return std::nullopt;
}

void Admission::leave(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  pending_.remove_if([&](const Pending& p) { return p.id == id; });
  if (auto it = admitted_.find(id); it != admitted_.end()) {
    if (auto count = per_address_.find(it->second);
        count != per_address_.end() && --count->second == 0) {
      per_address_.erase(count);
    }
    admitted_.erase(it);
  }
}

std::size_t Admission::unauthenticated() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

std::size_t Admission::authenticated() const {
  std::lock_guard lock(mutex_);
  return admitted_.size();
}

}  // namespace vt
