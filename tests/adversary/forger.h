#pragma once
// A forger that works from the documented formats (docs/log.md, docs/fingerprint.md,
// docs/snapshot.md, docs/workdir.md) on a finished workdir: it edits committed records and
// states after the fact and re-signs the whole chain with a key it holds - the provider's own
// (a provider cheating on its own log) or a fresh one (someone passing off another's work).
// Unlike cheater.h it never trains: it rewrites what was committed.
//
// Never linked into the veritrain binary (tests/adversary/CMakeLists.txt).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "common/bytes.h"
#include "fingerprint/sampling.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "protocol/task.h"

namespace vt::adversary {

// Called for every epoch in order with its record and canonical state. An edit that changes the
// state must commit it (commit_state, or a root of its own); the forger stores every state
// whose root is not stored yet.
using ForgeEdit = std::function<Status(std::uint64_t epoch, CommitRecord& record, Bytes& state)>;

// Applies `edit` and rewrites commitments.log: every record re-chained (prev) and re-signed by
// `key`.
Status reforge_workdir(const std::filesystem::path& workdir, const SigningKey& key,
                       const ForgeEdit& edit);

// What an honest provider commits for `state` at `epoch`: its root, and the fingerprint and
// tracking fingerprint at the positions the task derives (docs/fingerprint.md sections 2-4).
Status commit_state(const Task& task, std::uint64_t epoch, ByteSpan state, CommitRecord& record);

// The fingerprint at positions of the forger's choosing: `seed` as the commitment seed of the
// root demands, but over the tensors it names only, with `k` positions.
Result<nlohmann::json> fingerprint_over(ByteSpan state, const Digest& seed,
                                        const std::vector<std::string>& tensors, std::uint64_t k);

// Adds `delta` to the first `fraction` of the elements of F32 tensor `name` (the tensor's bytes
// are rewritten in place, so the file stays canonical).
Result<Bytes> shift_tensor(ByteSpan state, const std::string& name, double fraction, float delta);

// Every byte of tensor `name` (any dtype) set to `byte`, in place: the file stays canonical.
Result<Bytes> fill_tensor(ByteSpan state, const std::string& name, std::uint8_t byte);

// The state with one more F32 tensor of zeros (the file rewritten canonically).
Result<Bytes> add_tensor(ByteSpan state, const std::string& name, std::vector<std::int64_t> shape);

}  // namespace vt::adversary
