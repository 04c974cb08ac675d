#pragma once
// What the server serves. provider/ implements this over its workdir; protocol/ never depends
// on provider/ (docs/architecture.md, "Allowed includes").
//
// Thread safety: the server calls every method concurrently, for different connections at once;
// implementations must be safe for that. Returned buffers are shared and must stay immutable
// (the server streams straight out of them). task() and log_records() run on the I/O threads,
// which every client waits on, so they must stay cheap; canonical_snapshot() and container(),
// which may read, decode or code a whole snapshot, run on the server's slow-work threads, at most
// ServerConfig::slow_threads at once.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/bytes.h"
#include "compression/container.h"
#include "protocol/log.h"

namespace vt {

struct ContainerRequest {
  std::uint64_t epoch = 0;
  comp::Codec codec = comp::Codec::kPlanes;  // the client's preference
  // The root of a snapshot the client already holds. When the catalog has that snapshot it
  // should return a kDelta container against it; otherwise any container of `epoch` will do.
  std::optional<Digest> base_root;
};

// A request for the provider's answer for one training step (docs/dispute.md): its signed step
// trace of step `step` of `epoch`, or with `call` its values of that call.
struct TraceRequest {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;
  std::optional<std::uint64_t> call;
};

class Catalog {
 public:
  virtual ~Catalog() = default;

  // The task file as the requestor signed it.
  virtual Result<Bytes> task() = 0;

  // Durable commitment records with epoch >= from_epoch, in epoch order; empty when none yet.
  virtual Result<std::vector<SignedRecord>> log_records(std::uint64_t from_epoch) = 0;

  // The canonical safetensors bytes of a committed epoch (for get_chunks).
  virtual Result<std::shared_ptr<const Bytes>> canonical_snapshot(std::uint64_t epoch) = 0;

  // A snapshot container (compression/container.h) of a committed epoch. The server reads the
  // codec and base root from the container itself, so the catalog may ignore the preference.
  // For a download to resume after a disconnect, repeated calls with the same request should
  // return the same bytes (a content-addressed store does); if they differ, the client is told
  // and restarts from offset 0.
  virtual Result<std::shared_ptr<const Bytes>> container(const ContainerRequest& request) = 0;

  // The answer for one step (a JSON document: docs/dispute.md), computed by replaying it: slow
  // work, like container(). A catalog that does not answer trace requests says so (invalid input,
  // which the client hears as "not_found").
  virtual Result<std::shared_ptr<const Bytes>> step_trace(const TraceRequest& request) {
    (void)request;
    return invalid_input("this provider does not answer trace requests");
  }
};

}  // namespace vt
