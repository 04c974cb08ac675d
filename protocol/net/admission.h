#pragma once
// Internal to protocol/: who may hold a connection slot on the server (docs/protocol.md, "Under
// abuse"). A connection passes three stages, each with a pool of its own, so that no earlier
// stage can take the slots of a later one:
//
//   silent         accepted, nothing received yet. It has cost the server an accept, a
//                  descriptor and a wait: no TLS state, no handshake. When the pool is full a
//                  newcomer pushes out, at once, the oldest silent connection of the address
//                  that holds the most of them. Sockets that never speak therefore only ever
//                  displace each other, even when they come from the verifier's own address:
//                  a verifier's connection speaks (its TLS ClientHello) at once and moves on.
//   handshaking    its first bytes arrived; TLS handshake and hello under way. When the pool
//                  (or the address's share of it) is full, the oldest member of the address
//                  that holds the most is pushed out if it has had `grace` to say hello;
//                  otherwise the newcomer is refused, so a burst of real clients is not cut
//                  short by its own members.
//   authenticated  its hello carried the token; limited in all and per address.
//
// An address is an IPv4 address, or the /64 prefix of an IPv6 one (what one host is usually
// given, so a host cannot claim 2^64 shares by varying the rest).

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace vt {

struct AdmissionLimits {
  std::size_t authenticated = 64;  // all addresses together
  std::size_t authenticated_per_address = 16;
  std::size_t handshaking = 32;  // from the first bytes to a valid hello
  std::size_t handshaking_per_address = 16;
  std::size_t silent = 1024;             // accepted, nothing received yet
  std::chrono::milliseconds grace{500};  // a handshaking connection is not pushed out sooner
};

// The admission key of a peer address ("203.0.113.7", "2001:db8:1:2::/64").
std::string admission_address(const std::string& ip);

class Admission {
 public:
  explicit Admission(AdmissionLimits limits);

  // Registers a just-accepted, silent connection from `address` (an admission_address); always
  // admitted, possibly by pushing out another silent one. `pushed_out` is called (outside the
  // lock) when a newer connection takes this one's slot, in either unauthenticated stage; it
  // must act soon on the connection's own executor: call speak() if bytes arrived meanwhile
  // (a connection pushed out while silent may still move on), else close it.
  std::uint64_t enter(const std::string& address, std::function<void()> pushed_out);

  // The connection's first bytes arrived: it moves to the handshaking pool. False when there
  // is no room there, or it was pushed out of that pool already: close it.
  bool speak(std::uint64_t id);

  // Moves the connection to the authenticated pool after a valid hello; a message saying why
  // not when it was pushed out meanwhile or that pool (or the address's share) is full.
  std::optional<std::string> authenticate(std::uint64_t id);

  // Whether the connection holds a slot in any stage (not pushed out, not left).
  bool admitted(std::uint64_t id) const;

  // The connection ended, in whichever stage it was.
  void leave(std::uint64_t id);

  // Forgets every connection and destroys its pushed_out callback: for a server that stops,
  // whose sessions end without leaving. Call it while the executors the callbacks hold are
  // alive (before the io_context goes): a callback outliving them would touch freed memory.
  void clear();

  std::size_t silent() const;
  std::size_t handshaking() const;
  std::size_t authenticated() const;
  std::uint64_t pushed_out() const;  // connections pushed out of either unauthenticated pool

 private:
  using Clock = std::chrono::steady_clock;
  struct Member {
    std::uint64_t id;
    Clock::time_point since;
  };
  // One stage's members, oldest first per address, and the addresses by how many they hold.
  struct Pool {
    std::size_t capacity = 0;
    std::size_t per_address = 0;
    Clock::duration grace{};
    std::size_t size = 0;
    std::map<std::string, std::list<Member>> members;
    std::set<std::pair<std::size_t, std::string>> holders;  // (members, address)

    std::list<Member>::iterator add(const std::string& address, Member member);
    void remove(const std::string& address, std::list<Member>::iterator at);
    // The member a newcomer from `address` pushes out, or nullopt when it fits as it is.
    // Sets `refused` when it neither fits nor may push anyone out.
    std::optional<std::pair<std::string, std::uint64_t>> victim(const std::string& address,
                                                                Clock::time_point now,
                                                                bool& refused) const;
  };
  enum class Stage { kSilent, kPushedSilent, kHandshaking, kPushed, kAuthenticated };
  struct Entry {
    Stage stage;
    std::string address;
    std::list<Member>::iterator at;  // in the pool of `stage`, when it has one
    std::function<void()> pushed_out;
  };

  // Takes `victim` out of its pool and returns its callback (to call outside the lock).
  std::function<void()> push_out(std::uint64_t victim);

  AdmissionLimits limits_;
  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;                            // GUARDED_BY(mutex_)
  Pool silent_, handshaking_;                            // GUARDED_BY(mutex_)
  std::size_t authenticated_ = 0;                        // GUARDED_BY(mutex_)
  std::map<std::string, std::size_t> authenticated_by_;  // GUARDED_BY(mutex_)
  std::unordered_map<std::uint64_t, Entry> entries_;     // GUARDED_BY(mutex_)
  std::uint64_t pushed_ = 0;                             // GUARDED_BY(mutex_)
};

}  // namespace vt
