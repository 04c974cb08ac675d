#pragma once
// Internal to protocol/: who may hold a connection slot on the server (docs/protocol.md, "Under
// abuse"). A connection is *unauthenticated* from accept until its hello carried the token, and
// only then competes for the authenticated slots, so sockets that never say hello cannot take
// the slots that verifiers need. Unauthenticated connections have a small pool of their own; a
// new one that finds the pool (or its address's share of it) full pushes out the oldest there
// if that one had `grace` to say hello and did not, so a pool of idle sockets delays a real
// client by nothing, while a burst of real clients (all younger than `grace`) is not cut short
// by its own members: the newcomer is refused instead.

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace vt {

struct AdmissionLimits {
  std::size_t authenticated = 64;  // all addresses together
  std::size_t authenticated_per_address = 16;
  std::size_t unauthenticated = 32;  // between accept and a valid hello
  std::size_t unauthenticated_per_address = 16;
  std::chrono::milliseconds grace{500};  // an unauthenticated connection is not pushed out sooner
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // Registers a just-accepted connection from `address`; nullopt when there is no room for it
  // (close it). `evict` is called (outside the lock, at most once) when a newer connection
  // takes its unauthenticated slot; it must close the connection soon, on its own executor.
  std::optional<std::uint64_t> enter(const std::string& address, std::function<void()> evict);

  // Moves the connection to the authenticated pool after a valid hello; a message saying why
  // not when that pool (or the address's share of it) is full.
  std::optional<std::string> authenticate(std::uint64_t id);

  // The connection ended, in whichever pool it was.
  void leave(std::uint64_t id);

  std::size_t unauthenticated() const;
  std::size_t authenticated() const;

 private:
  struct Pending {
    std::uint64_t id;
    std::string address;
    std::chrono::steady_clock::time_point since;
    std::function<void()> evict;
  };

  AdmissionLimits limits_;
  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;                       // GUARDED_BY(mutex_)
  std::list<Pending> pending_;                      // GUARDED_BY(mutex_), oldest first
  std::map<std::uint64_t, std::string> admitted_;   // GUARDED_BY(mutex_)
  std::map<std::string, std::size_t> per_address_;  // GUARDED_BY(mutex_), authenticated only
};

}  // namespace vt
