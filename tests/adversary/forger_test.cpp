// A provider holding its own key rewrites a finished workdir (tests/adversary/forger.h)
// and re-signs it. Every such cheat ends in a rejection that names the epoch and the cause; the
// same harness with an edit that changes nothing is accepted, so each test can fail.

#include "tests/adversary/forger.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/adversary/support.h"
#include "verifier/check/verify.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;

Task tolerance_tiny(std::uint64_t seed) {
  Task task = tiny_task(seed);
  task.determinism = Determinism::kTolerance;
  task.tolerance = {1e-6, 0.0, 1e-4, 0.0};
  return task;
}

struct Forged {
  testing::ScratchDir dir;
  Task task;
  fs::path wd;
  explicit Forged(Task t) : task(std::move(t)), wd(dir / "wd") {
    auto run = write_workdir(task, wd, {}, provider_key());
    EXPECT_TRUE(run.ok()) << run.error().message;
  }
  fs::path snapshot(std::uint64_t epoch) const {
    auto log = read_log(wd / "commitments.log");
    return wd / "snapshots" / (hex_encode(log->records.at(epoch).record.root) + ".vtc");
  }
};

// `verify` challenging every epoch (p = 1), as a requestor would run it.
verifier::Verdict verify_all(const Forged& f, bool fingerprint_only = false,
                             std::optional<std::string> provider_key = std::nullopt) {
  auto source = verifier::open_workdir_source(f.wd);
  EXPECT_TRUE(source.ok()) << source.error().message;
  verifier::VerifyOptions o;
  o.policy.check_probability = 1.0;
  o.seed_hex = "01";
  o.fetch_after = fingerprint_only ? verifier::FetchAfter::kNever : verifier::FetchAfter::kAuto;
  o.provider_key = std::move(provider_key);
  auto v = verifier::verify(**source, f.task, o);
  EXPECT_TRUE(v.ok()) << "a provider's failure must be a verdict, not an error: "
                      << v.error().message;
  return v.ok() ? *v : verifier::Verdict{};
}

std::string reasons(const verifier::Verdict& v) { return joined(v.reasons); }

Status no_edit(std::uint64_t, CommitRecord&, Bytes&) { return {}; }

// The largest F32 parameter of a state: what a cheater shifts to change the model most.
std::string largest_parameter(ByteSpan state) {
  auto view = parse_safetensors(state);
  std::string best;
  std::uint64_t n = 0;
  for (const TensorEntry& t : view->tensors) {
    if (t.name.rfind("param/", 0) == 0 && t.dtype == DType::kF32 && t.numel() > n)
      best = t.name, n = t.numel();
  }
  return best;
}

TEST(Forger, ResigningWithoutAnEditIsAccepted) {
  Forged f(tolerance_tiny(3));
  ASSERT_TRUE(reforge_workdir(f.wd, provider_key(), no_edit).ok());
  const verifier::Verdict v = verify_all(f, true);
  EXPECT_TRUE(v.accepted) << reasons(v);
}

// The cheat: a tenth of one tensor of the final model moved by 0.5, committed with a
// fingerprint whose tensor list leaves that tensor out. Accepted by --fingerprint-only before.
TEST(Forger, TamperedFinalModelWithChosenTensorListIsRejected) {
  Forged f(tolerance_tiny(5));
  const std::uint64_t last = static_cast<std::uint64_t>(f.task.epochs);
  Status s = reforge_workdir(
      f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != last) return {};
        const std::string target = largest_parameter(state);
        VT_ASSIGN_OR_RETURN(state, shift_tensor(state, target, 0.1, 0.5f));
        VT_RETURN_IF_ERROR(commit_state(f.task, e, state, r));
        auto view = parse_safetensors(state);
        std::vector<std::string> others;
        for (const TensorEntry& t : view->tensors) {
          if (t.name != target) others.push_back(t.name);
        }
        VT_ASSIGN_OR_RETURN(
            r.fingerprint,
            fingerprint_over(state, fp::commitment_seed(task_id(f.task), e, r.root), others,
                             static_cast<std::uint64_t>(f.task.fingerprint.k)));
        return {};
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (bool fingerprint_only : {true, false}) {
    const verifier::Verdict v = verify_all(f, fingerprint_only);
    EXPECT_FALSE(v.accepted) << "fingerprint_only " << fingerprint_only;
    const std::string why = reasons(v);
    EXPECT_NE(why.find("epoch " + std::to_string(last) +
                       ": committed fingerprint samples other positions than the task "
                       "derives"),
              std::string::npos)
        << why;
  }
}

// The same with the task's tensors but fewer positions than the task's k.
TEST(Forger, FingerprintWithFewerPositionsIsRejected) {
  Forged f(tolerance_tiny(7));
  Status s = reforge_workdir(
      f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 2) return {};
        auto view = parse_safetensors(state);
        std::vector<std::string> all;
        for (const TensorEntry& t : view->tensors) all.push_back(t.name);
        VT_ASSIGN_OR_RETURN(
            r.fingerprint,
            fingerprint_over(state, fp::commitment_seed(task_id(f.task), e, r.root), all,
                             static_cast<std::uint64_t>(f.task.fingerprint.k / 2)));
        return {};
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f, true);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(reasons(v).find("epoch 2: committed fingerprint samples other positions"),
            std::string::npos)
      << reasons(v);
}

// Someone re-signs a whole (honest) log with a key of their own: only the trust anchor tells.
TEST(Forger, LogResignedWithAFreshKeyIsRejectedAgainstThePinnedKey) {
  Forged f(tiny_task(9));
  const SigningKey fresh = *SigningKey::generate();
  ASSERT_TRUE(reforge_workdir(f.wd, fresh, no_edit).ok());
  const std::string provider = provider_key().public_key().fingerprint();

  const verifier::Verdict pinned = verify_all(f, false, provider);
  EXPECT_FALSE(pinned.accepted);
  EXPECT_NE(reasons(pinned).find("the log is signed by key " + fresh.public_key().fingerprint() +
                                 ", not by the provider key given with --provider-key (" +
                                 provider + ")"),
            std::string::npos)
      << reasons(pinned);
  EXPECT_EQ(pinned.provider_key, fresh.public_key().fingerprint());
  EXPECT_FALSE(pinned.provider_key_pinned);

  // Without the anchor the log checks out, and the verdict says whose key it trusted.
  const verifier::Verdict unpinned = verify_all(f);
  EXPECT_TRUE(unpinned.accepted) << reasons(unpinned);
  EXPECT_FALSE(unpinned.provider_key_pinned);
  EXPECT_EQ(unpinned.provider_key, fresh.public_key().fingerprint());
  EXPECT_NE(joined(unpinned.notes).find("the provider key was not pinned"), std::string::npos);

  const verifier::Verdict right = verify_all(f, false, fresh.public_key().fingerprint());
  EXPECT_TRUE(right.accepted) << reasons(right);
  EXPECT_TRUE(right.provider_key_pinned);
}

// Metadata that disagrees with the task is the provider's failure, named, not an input error.
TEST(Forger, MetadataThatDisagreesWithTheTaskIsARejection) {
  Forged f(tiny_task(11));
  Status s = reforge_workdir(
      f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 1) return {};
        VT_ASSIGN_OR_RETURN(state, rewrite_metadata(state, {{"intra_op_threads", "2"}}));
        return commit_state(f.task, e, state, r);
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(
      reasons(v).find(
          "epoch 1: the committed state: metadata intra_op_threads is \"2\", the task says 1"),
      std::string::npos)
      << reasons(v);
  EXPECT_NE(reasons(v).find("epoch 2: the state committed for epoch 1: metadata intra_op_threads"),
            std::string::npos)
      << reasons(v);
}

// A state whose RNG bytes are no generator state at all (the right size, so every plan and list
// check passes): restoring it fails, and that is the provider's failure, named with the epoch.
TEST(Forger, StateThatCannotBeRestoredIsARejection) {
  Forged f(tiny_task(17));
  Status s = reforge_workdir(f.wd, provider_key(),
                             [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
                               if (e != 1) return {};
                               VT_ASSIGN_OR_RETURN(state, fill_tensor(state, "rng/cpu", 0xff));
                               return commit_state(f.task, e, state, r);
                             });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(reasons(v).find("epoch 2: the committed state cannot be restored"), std::string::npos)
      << reasons(v);
}

// A state with a tensor the task's model does not have, committed with fingerprints over the
// task's own tensors (so every plan is the one the task derives): the tensor list gives it away.
TEST(Forger, StateWithATensorTheTaskLacksIsRejected) {
  Forged f(tiny_task(29));
  Status s = reforge_workdir(
      f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 1) return {};
        std::vector<std::string> names;
        VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
        for (const TensorEntry& t : view.tensors) names.push_back(t.name);
        VT_ASSIGN_OR_RETURN(state, add_tensor(state, "param/extra", {4}));
        VT_RETURN_IF_ERROR(commit_state(f.task, e, state, r));
        const Digest id = task_id(f.task);
        VT_ASSIGN_OR_RETURN(r.fingerprint,
                            fingerprint_over(state, fp::commitment_seed(id, e, r.root), names,
                                             static_cast<std::uint64_t>(f.task.fingerprint.k)));
        VT_ASSIGN_OR_RETURN(
            r.tracking_fingerprint,
            fingerprint_over(state, fp::tracking_seed(id), names,
                             static_cast<std::uint64_t>(f.task.fingerprint.tracking_k)));
        return {};
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f);
  EXPECT_FALSE(v.accepted);
  EXPECT_TRUE(v.log_failures.empty()) << joined(v.log_failures);
  EXPECT_NE(reasons(v).find(
                "epoch 1: the committed state: tensor param/extra is not part of the task's model"),
            std::string::npos)
      << reasons(v);
}

TEST(Forger, WithheldSnapshotIsARejection) {
  Forged f(tiny_task(13));
  ASSERT_TRUE(fs::remove(f.snapshot(2)));
  const verifier::Verdict v = verify_all(f);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(
      reasons(v).find("epoch 2: the committed snapshot is unusable: epoch 2 snapshot is withheld"),
      std::string::npos)
      << reasons(v);
}

// Exact and portable mode: the replay is the epoch, so the claimed loss must be its bits.
TEST(Forger, WrongClaimedLossIsRejectedAndHonestLossIsVerified) {
  for (Determinism determinism : {Determinism::kExact, Determinism::kPortable}) {
    SCOPED_TRACE(name_string(determinism));
    Forged f(tiny_task(17, 3, 0, determinism));
    const verifier::Verdict honest = verify_all(f);
    ASSERT_TRUE(honest.accepted) << reasons(honest);
    for (const auto& c : honest.checks) {
      EXPECT_TRUE(c.loss_verified) << "epoch " << c.epoch;
      ASSERT_TRUE(c.replay_loss.has_value());
      EXPECT_EQ(*c.replay_loss, c.claimed_loss);
    }
    Status s = reforge_workdir(
        f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes&) -> Status {
          if (e == 2) r.metrics.loss = std::nextafter(r.metrics.loss, 0.0);  // one ulp lower
          return {};
        });
    ASSERT_TRUE(s.ok()) << s.error().message;
    const verifier::Verdict v = verify_all(f);
    EXPECT_FALSE(v.accepted);
    EXPECT_NE(reasons(v).find("epoch 2: committed loss"), std::string::npos) << reasons(v);
    EXPECT_EQ(v.reasons.size(), 1u) << reasons(v);  // epochs 1 and 3 still verify
  }
}

// Exact mode: the trail must be the replay's, bit for bit; and its plans the task's, in any mode.
TEST(Forger, TamperedTrailIsRejected) {
  Forged f(tiny_task(19, 3, 1));
  Status s = reforge_workdir(
      f.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes&) -> Status {
        if (e != 2 || r.trail.empty()) return {};
        // One value's lowest bit: the plan stays the one the task derives.
        std::string values = r.trail[0]["tensors"][0]["values"].get<std::string>();
        values[1] = values[1] == '0' ? '1' : '0';
        r.trail[0]["tensors"][0]["values"] = values;
        return {};
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(
      reasons(v).find("epoch 2: the committed trail fingerprint at step 1 is not the replay's"),
      std::string::npos)
      << reasons(v);

  Forged g(tiny_task(21, 3, 1));
  ASSERT_TRUE(reforge_workdir(g.wd, provider_key(),
                              [&](std::uint64_t e, CommitRecord& r, Bytes&) -> Status {
                                if (e == 1 && r.trail.size() >= 2)
                                  std::swap(r.trail[0], r.trail[1]);
                                return {};
                              })
                  .ok());
  const verifier::Verdict swapped = verify_all(g, true);
  EXPECT_FALSE(swapped.accepted);
  EXPECT_NE(reasons(swapped).find(
                "epoch 1: the committed trail fingerprint at step 1 samples other positions"),
            std::string::npos)
      << reasons(swapped);
}

// The tracking fingerprint is checked on every fetched state.
TEST(Forger, TrackingFingerprintOfAnotherStateIsRejected) {
  Forged f(tiny_task(23));
  nlohmann::json earlier;
  Status s = reforge_workdir(f.wd, provider_key(),
                             [&](std::uint64_t e, CommitRecord& r, Bytes&) -> Status {
                               if (e == 1) earlier = r.tracking_fingerprint;
                               if (e == 2) r.tracking_fingerprint = earlier;
                               return {};
                             });
  ASSERT_TRUE(s.ok()) << s.error().message;
  const verifier::Verdict v = verify_all(f, true);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(reasons(v).find("epoch 3: the state committed for epoch 2: committed tracking "
                            "fingerprint does not match"),
            std::string::npos)
      << reasons(v);
}

}  // namespace
}  // namespace vt::adversary
