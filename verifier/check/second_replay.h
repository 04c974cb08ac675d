#pragma once
// A second replay before a rejection (docs/verifier.md, "A second replay before a rejection").
// A replay compared bit for bit that misses the provider's commitment accuses only if this
// verifier can reproduce it: the epoch is replayed once more, in a fresh process whose heap
// starts scrambled (scrambled_memory_environment), so that arithmetic which reads memory it never
// wrote, or which depends on thread timing, gives other bits the second time. Replays that agree
// with each other judge the epoch; replays that differ leave it inconclusive, and nothing is held
// against the provider. The second replay runs only after a miss: an honest epoch costs nothing.

#include <cstdint>
#include <string>

#include "verifier/check/epoch_check.h"
#include "verifier/source/source.h"

namespace vt::verifier {

// Replays the epoch after the canonical state `start` in a fresh `replay-worker` of
// ctx.second_replay_program, its memory scrambled; in this process when that is empty.
Result<Replay> replay_again(const CheckContext& ctx, std::uint64_t epoch, ByteSpan start);

// Where two replays of one epoch differ in the state they reach or the loss they measured, for
// people: "tensor optim/fc.weight/momentum_buffer (12 of 640 values)", "the epoch's mean loss".
// Empty when they agree. Only `snapshot`, `root` and `loss` are read.
std::string state_difference(const Replay& first, const Replay& second);
// state_difference, then every other figure a judgement compares (trail, held-out metrics, data
// order, step counts).
std::string replay_difference(const Replay& first, const Replay& second);

// What the verdict or the audit says of an epoch whose replays differ (`difference`, as above).
std::string irreproducible_text(std::uint64_t epoch, const std::string& difference);

// judge_epoch, and when that compared bit for bit and failed on what the replay produced (not
// on the evidence alone), replay_again before the failure stands. `prepared.start` is used if it
// is still held, else the start state is fetched again from `source`.
Result<EpochCheck> judge_with_second_replay(PreparedEpoch prepared, const Replay& first,
                                            EvidenceSource& source, const CheckContext& ctx);

}  // namespace vt::verifier
