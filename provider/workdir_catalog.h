#pragma once
// The provider's side of the wire protocol: a Catalog (protocol/net/catalog.h) over a workdir,
// safe for the server's concurrent I/O threads while `train` keeps appending.

#include <filesystem>
#include <functional>
#include <memory>

#include "protocol/net/catalog.h"

namespace vt::provider {

// Serves `workdir`: the stored container of an epoch when the client can decode it (a whole
// snapshot, or a delta against the base it holds), else one coded for it on demand — a delta
// against the client's base when the workdir has that base, a whole snapshot otherwise.
// Coded containers are cached so that a resumed download receives the same bytes.
//
// With `answer`, it also answers trace requests (docs/dispute.md) with what `answer` returns,
// one at a time: a trace replays a step, so the command line answers in a child veritrain-torch.
using TraceAnswerer = std::function<Result<Bytes>(const TraceRequest& request)>;
Result<std::shared_ptr<Catalog>> open_workdir_catalog(const std::filesystem::path& workdir,
                                                      TraceAnswerer answer = {});

}  // namespace vt::provider
