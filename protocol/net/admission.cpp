#include "protocol/net/admission.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace vt {

std::string admission_address(const std::string& ip) {
  in6_addr v6{};
  if (::inet_pton(AF_INET6, ip.c_str(), &v6) != 1) return ip;  // IPv4 (or not an address)
  char text[INET6_ADDRSTRLEN] = {};
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    return ::inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof(text)) != nullptr ? text : ip;
  }
  std::memset(&v6.s6_addr[8], 0, 8);
  if (::inet_ntop(AF_INET6, &v6, text, sizeof(text)) == nullptr) return ip;
  return std::string(text) + "/64";
}

std::list<Admission::Member>::iterator Admission::Pool::add(const std::string& address,
                                                            Member member) {
  auto& list = members[address];
  if (!list.empty()) holders.erase({list.size(), address});
  list.push_back(member);
  holders.insert({list.size(), address});
  ++size;
  return std::prev(list.end());
}

void Admission::Pool::remove(const std::string& address, std::list<Member>::iterator at) {
  auto it = members.find(address);
  holders.erase({it->second.size(), address});
  it->second.erase(at);
  if (it->second.empty()) {
    members.erase(it);
  } else {
    holders.insert({it->second.size(), address});
  }
  --size;
}

std::optional<std::pair<std::string, std::uint64_t>> Admission::Pool::victim(
    const std::string& address, Clock::time_point now, bool& refused) const {
  refused = false;
  auto own = members.find(address);
  const std::size_t held = own == members.end() ? 0 : own->second.size();
  const std::string* from = nullptr;
  if (held >= per_address) {
    from = &address;
  } else if (size >= capacity) {
    // Fair shares: the address holding the most gives way, so one that holds few (a verifier
    // among a flood from elsewhere) always finds room.
    from = &holders.rbegin()->second;
  } else {
    return std::nullopt;
  }
  const Member& oldest = members.at(*from).front();
  if (now - oldest.since < grace) {
    refused = true;
    return std::nullopt;
  }
  return std::make_pair(*from, oldest.id);
}

Admission::Admission(AdmissionLimits limits) : limits_(limits) {
  silent_.capacity = std::max<std::size_t>(1, limits.silent);
  silent_.per_address = silent_.capacity;
  handshaking_.capacity = std::max<std::size_t>(1, limits.handshaking);
  handshaking_.per_address = std::max<std::size_t>(1, limits.handshaking_per_address);
  handshaking_.grace = limits.grace;
}

std::function<void()> Admission::push_out(std::uint64_t victim) {
  Entry& entry = entries_.at(victim);
  if (entry.stage == Stage::kSilent) {
    silent_.remove(entry.address, entry.at);
    entry.stage = Stage::kPushedSilent;
  } else {
    handshaking_.remove(entry.address, entry.at);
    entry.stage = Stage::kPushed;
  }
  ++pushed_;
  return entry.pushed_out;
}

std::uint64_t Admission::enter(const std::string& address, std::function<void()> pushed_out) {
  std::function<void()> victim_out;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    bool refused = false;  // never: the silent pool has no grace
    if (auto victim = silent_.victim(address, now, refused)) victim_out = push_out(victim->second);
    id = next_id_++;
    auto at = silent_.add(address, Member{id, now});
    entries_.emplace(id, Entry{Stage::kSilent, address, at, std::move(pushed_out)});
  }
  if (victim_out) victim_out();
  return id;
}

bool Admission::speak(std::uint64_t id) {
  std::function<void()> victim_out;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    Entry& entry = it->second;
    if (entry.stage == Stage::kHandshaking || entry.stage == Stage::kAuthenticated) return true;
    if (entry.stage == Stage::kPushed) return false;
    if (entry.stage == Stage::kSilent) silent_.remove(entry.address, entry.at);
    const auto now = Clock::now();
    bool refused = false;
    auto victim = handshaking_.victim(entry.address, now, refused);
    if (refused) {
      entry.stage = Stage::kPushed;
      return false;
    }
    if (victim) victim_out = push_out(victim->second);
    entry.at = handshaking_.add(entry.address, Member{id, now});
    entry.stage = Stage::kHandshaking;
  }
  if (victim_out) victim_out();
  return true;
}

std::optional<std::string> Admission::authenticate(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  // Pushed out meanwhile: its close is already on the way, so the hello does not count.
  if (it == entries_.end() || it->second.stage == Stage::kPushed ||
      it->second.stage == Stage::kPushedSilent) {
    return "the connection was closed to make room for newer ones";
  }
  Entry& entry = it->second;
  if (entry.stage == Stage::kAuthenticated) return std::nullopt;
  if (entry.stage == Stage::kSilent) {
    silent_.remove(entry.address, entry.at);
  } else {
    handshaking_.remove(entry.address, entry.at);
  }
  entry.stage = Stage::kPushed;  // in no pool, until it is admitted below
  if (authenticated_ >= limits_.authenticated) {
    return "the server is at its limit of " + std::to_string(limits_.authenticated) +
           " connections; try again later";
  }
  std::size_t& from_address = authenticated_by_[entry.address];
  if (from_address >= limits_.authenticated_per_address) {
    return "the server is at its limit of " + std::to_string(limits_.authenticated_per_address) +
           " connections from " + entry.address + "; try again later";
  }
  ++from_address;
  ++authenticated_;
  entry.stage = Stage::kAuthenticated;
  return std::nullopt;
}

bool Admission::admitted(std::uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.stage != Stage::kPushed &&
         it->second.stage != Stage::kPushedSilent;
}

void Admission::leave(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  switch (entry.stage) {
    case Stage::kSilent:
      silent_.remove(entry.address, entry.at);
      break;
    case Stage::kHandshaking:
      handshaking_.remove(entry.address, entry.at);
      break;
    case Stage::kAuthenticated: {
      --authenticated_;
      auto count = authenticated_by_.find(entry.address);
      if (--count->second == 0) authenticated_by_.erase(count);
      break;
    }
    case Stage::kPushedSilent:
    case Stage::kPushed:
      break;
  }
  entries_.erase(it);
}

void Admission::clear() {
  std::unordered_map<std::uint64_t, Entry> entries;
  {
    std::lock_guard lock(mutex_);
    entries.swap(entries_);
    for (Pool* pool : {&silent_, &handshaking_}) {
      pool->members.clear();
      pool->holders.clear();
      pool->size = 0;
    }
    authenticated_ = 0;
    authenticated_by_.clear();
  }
  // The callbacks go here, outside the lock: they may hold the last reference to a strand.
}

std::size_t Admission::silent() const {
  std::lock_guard lock(mutex_);
  return silent_.size;
}

std::size_t Admission::handshaking() const {
  std::lock_guard lock(mutex_);
  return handshaking_.size;
}

std::size_t Admission::authenticated() const {
  std::lock_guard lock(mutex_);
  return authenticated_;
}

std::uint64_t Admission::pushed_out() const {
  std::lock_guard lock(mutex_);
  return pushed_;
}

}  // namespace vt
