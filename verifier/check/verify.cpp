#include "verifier/check/verify.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <set>

#include "common/text.h"
#include "training/zoo/sizes.h"
#include "verifier/check/environment_check.h"
#include "verifier/check/log_check.h"
#include "verifier/check/replay_jobs.h"
#include "verifier/check/second_replay.h"
#include "verifier/check/verify_state.h"

namespace vt::verifier {
namespace {

class Run {
 public:
  Run(EvidenceSource& source, const Task& task, const VerifyOptions& options,
      std::shared_ptr<ScratchFolder> scratch)
      : reuse_(reuse_last_snapshot(source, scratch, options.large_state_bytes)),
        source_(*reuse_),
        task_(task),
        options_(options) {
    ctx_.scratch = std::move(scratch);
    ctx_.large_state_bytes = options.large_state_bytes;
    ctx_.task = &task;
    ctx_.task_id = task_id(task);
    ctx_.trainer = options.trainer;
    ctx_.fetch_after = options.fetch_after;
    ctx_.second_replay_program = options.replay_program;
    verdict_.task_id = hex_encode(ctx_.task_id);
    verdict_.epochs = static_cast<std::uint64_t>(task.epochs);
    verdict_.source = source.describe();
    verdict_.online = options.online;
    verdict_.started = utc_now_iso8601();
    if (options.environment) {
      verdict_.verifier_environment = options.environment->here;
      verdict_.environment_unmatched = options.environment->unmatched;
      if (!options.environment->note.empty()) verdict_.notes.push_back(options.environment->note);
    }
  }

  Result<Verdict> offline() {
    VT_ASSIGN_OR_RETURN(LogFacts facts,
                        check_log(source_, task_, log_trainer(), /*require_complete=*/true,
                                  options_.provider_key, replays()));
    ctx_.layout = facts.layout;
    ctx_.replayer = facts.trainer;  // one trainer in this process, for every replay here
    say("log: " + std::to_string(facts.records.size()) + " commitments, " +
        (facts.failures.empty() ? std::string("signatures, chain, task and initial state check out")
                                : facts.failures.front()));
    if (!replays()) return unjudged(facts);
    VerifyState state;
    if (options_.resume) {
      VT_ASSIGN_OR_RETURN(state, resumed_state(facts));
    } else {
      VT_ASSIGN_OR_RETURN(state, fresh_state(facts));
    }
    VT_ASSIGN_OR_RETURN(ProbabilityDerivation derivation,
                        derive_probability(state.policy, verdict_.epochs));
    VT_ASSIGN_OR_RETURN(ChallengeRandom random, ChallengeRandom::from_seed_hex(state.seed_hex));
    std::vector<double> movements;
    if (facts.failures.empty()) {
      auto m = tracking_movements(facts.records);
      if (m) {
        movements = std::move(*m);
      } else {
        verdict_.notes.push_back("tracking fingerprints unusable, no movement boost: " +
                                 m.error().message);
      }
    }
    verdict_.plan = plan_challenges(derivation, movements, random);
    if (!state.seed_given) verdict_.plan.seed_hex.clear();  // a secret seed stays secret
    if (facts.failures.empty()) {
      say("challenging epochs " + list(verdict_.plan.challenged) +
          " (p = " + std::to_string(derivation.p) + ")");
      if (!options_.resume && !options_.state_dir.empty())
        VT_RETURN_IF_ERROR(begin_state(options_.state_dir, state));
      progress(0, true);
      VT_RETURN_IF_ERROR(take_judged(state));
      VT_RETURN_IF_ERROR(challenge_all(facts.records, verdict_.plan.challenged));
      VT_RETURN_IF_ERROR(check_final_model(source_, facts, ctx_, facts.failures));
    }
    return finish(facts);
  }

  Result<Verdict> online() {
    VT_ASSIGN_OR_RETURN(CheckContext derived,
                        make_check_context(task_, options_.trainer, options_.fetch_after));
    SourceLimits limits = limits_for(task_);
    limits.log.record_bytes =
        training::record_bytes_bound(task_, derived.steps_per_epoch, derived.layout);
    source_.set_limits(limits);
    ctx_.layout = std::move(derived.layout);
    ctx_.steps_per_epoch = derived.steps_per_epoch;
    ctx_.replayer = std::move(derived.replayer);
    VT_ASSIGN_OR_RETURN(ProbabilityDerivation derivation,
                        derive_probability(options_.policy, verdict_.epochs));
    VT_ASSIGN_OR_RETURN(ChallengeRandom random, make_random());
    ChallengeStream stream(derivation, std::move(random));
    std::vector<SignedRecord> records;
    Status inner;
    Status followed = source_.follow(
        0,
        [&](const SignedRecord& r) {
          records.push_back(r);
          // Each new record must extend a valid signed chain for this task before it is judged.
          if (auto chain = verify_log(records, ctx_.task_id); !chain) {
            inner = rejected(chain.error().message);
            return false;
          }
          if (options_.provider_key) {
            auto signer = PublicKey::from_raw(r.record.signer);
            const std::string by = signer ? signer->fingerprint() : std::string("(malformed)");
            if (by != *options_.provider_key) {
              inner = rejected("epoch " + std::to_string(r.record.epoch) + ": signed by key " + by +
                               ", not by the provider key given with --provider-key (" +
                               *options_.provider_key + ")");
              return false;
            }
          }
          const std::uint64_t e = r.record.epoch;
          say("epoch " + std::to_string(e) + " committed");
          if (e == 0 || !replays()) return e < verdict_.epochs;
          auto decided = stream.decide(movement(records[e - 1], records[e]));
          if (!decided) {
            inner = decided.error();
            return false;
          }
          challenged_so_far_ = stream.plan().challenged.size();
          if (*decided) {
            // Said as drawn, not "while training runs": a verifier that subscribes after training
            // ended draws every epoch from the backlog.
            say("epoch " + std::to_string(e) + " challenged as its commitment arrived (p = " +
                std::to_string(stream.plan().epochs.back().probability) + ")");
            progress(0, false);
            if (auto s = challenge(records, e, e == verdict_.epochs); !s) {
              inner = s;
              return false;
            }
          }
          return e < verdict_.epochs;
        },
        options_.online_wait);
    if (!inner && inner.error().code != Errc::kRejected) return inner.error();
    // A provider that stops committing, or whose stream breaks, is judged on what it committed.
    if (!followed && inner)
      verdict_.notes.push_back("following the provider's commitments ended: " +
                               followed.error().message);
    VT_ASSIGN_OR_RETURN(LogFacts facts,
                        check_log(source_, task_, log_trainer(), /*require_complete=*/true,
                                  options_.provider_key, replays()));
    if (!inner) facts.failures.push_back(inner.error().message);
    if (!replays()) return unjudged(facts);
    VT_ASSIGN_OR_RETURN(std::optional<std::uint64_t> fallback, stream.finish());
    verdict_.plan = stream.plan();
    progress(0, true);
    if (facts.failures.empty()) {
      if (fallback)
        VT_RETURN_IF_ERROR(
            challenge(facts.records, *fallback, *fallback + 1 == facts.records.size()));
      VT_RETURN_IF_ERROR(check_final_model(source_, facts, ctx_, facts.failures));
    }
    return finish(facts);
  }

 private:
  // False when this verifier cannot reproduce the provider's committed arithmetic environment.
  bool replays() const { return !options_.environment || options_.environment->unmatched.empty(); }

  // What check_log derives from the task (the initial state, the layout) is the same on every
  // device: weights are made on the CPU, then moved. Without replays it is derived on the CPU, so
  // that a verifier without the provider's GPU still checks all that needs no replay, and an
  // exact CUDA task ends inconclusive there instead of in "CUDA is not available".
  training::TrainerOptions log_trainer() const {
    training::TrainerOptions trainer = options_.trainer;
    if (!replays()) trainer.device = "cpu";
    return trainer;
  }

  // Without replays, what needs none still decides: the log, and the final model against its
  // committed root. Nothing else can be held against the provider.
  Result<Verdict> unjudged(LogFacts& facts) {
    say("not replaying: this machine cannot reproduce the provider's arithmetic environment");
    if (facts.failures.empty())
      VT_RETURN_IF_ERROR(check_final_model(source_, facts, ctx_, facts.failures));
    return finish(facts);
  }

  // The policy and a seed for a new run: --seed's, or 32 bytes of OS randomness, kept secret
  // (the verdict does not record it) but sealed in the state folder for --resume.
  Result<VerifyState> fresh_state(const LogFacts& facts) {
    VerifyState s;
    s.task_id = verdict_.task_id;
    s.log_head = hex_encode(facts.head);
    s.policy = options_.policy;
    if (options_.seed_hex) {
      VT_ASSIGN_OR_RETURN(ChallengeRandom given,
                          ChallengeRandom::from_seed_hex(*options_.seed_hex));
      s.seed_hex = given.seed_hex();
      s.seed_given = true;
      return s;
    }
    Bytes seed(32);
    if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
      return io_error("challenge seed: OpenSSL RAND_bytes could not read the OS CSPRNG");
    }
    s.seed_hex = hex_encode(seed);
    return s;
  }

  Result<VerifyState> resumed_state(const LogFacts& facts) {
    VT_ASSIGN_OR_RETURN(VerifyState s, load_state(options_.state_dir));
    if (s.task_id != verdict_.task_id) {
      return invalid_input("--resume: " + options_.state_dir.string() + " is a run of task " +
                           s.task_id + ", not of this task (" + verdict_.task_id + ")");
    }
    if (s.log_head != hex_encode(facts.head)) {
      return invalid_input(
          "--resume: the provider's log is not the one the interrupted run judged (its head was " +
          s.log_head + ", now " + hex_encode(facts.head) + "); start a new verify");
    }
    return s;
  }

  // A resumed run's epochs judged before the interruption: their results stand, unreplayed.
  Status take_judged(const VerifyState& state) {
    std::size_t kept = 0;
    for (std::uint64_t e : verdict_.plan.challenged) {
      auto it = state.checks.find(e);
      if (it == state.checks.end()) continue;
      judged_.insert(e);
      ++kept;
      VT_RETURN_IF_ERROR(record(it->second, /*save=*/false));
    }
    if (options_.resume) {
      say("resuming: " + std::to_string(kept) + " of " +
          std::to_string(verdict_.plan.challenged.size()) +
          " challenged epochs were judged before the interruption; replaying the rest");
    }
    return {};
  }

  Result<ChallengeRandom> make_random() {
    return options_.seed_hex ? ChallengeRandom::from_seed_hex(*options_.seed_hex)
                             : ChallengeRandom::from_os();
  }

  double movement(const SignedRecord& before, const SignedRecord& after) {
    auto a = fp::fingerprint_from_json(before.record.tracking_fingerprint);
    auto b = fp::fingerprint_from_json(after.record.tracking_fingerprint);
    if (!a || !b) return std::numeric_limits<double>::quiet_NaN();
    auto m = fingerprint_movement(*a, *b);
    return m ? *m : std::numeric_limits<double>::quiet_NaN();
  }

  // False, with the reason noted, for an epoch that has no transition to check.
  bool committed(const std::vector<SignedRecord>& records, std::uint64_t e) {
    if (e != 0 && e < records.size()) return true;
    verdict_.reasons.push_back("epoch " + std::to_string(e) + ": challenged but not committed");
    return false;
  }

  // Whether the committed state after epoch e will be fetched anyway: as the start of the next
  // challenged epoch, or as the final model (check_final_model). Online, later challenges are
  // not drawn yet: only the final model counts.
  static bool after_needed_later(const std::vector<SignedRecord>& records,
                                 const std::vector<std::uint64_t>& epochs, std::uint64_t e) {
    const bool next = std::find(epochs.begin(), epochs.end(), e + 1) != epochs.end();
    return next || e + 1 == records.size();
  }

  Status challenge(const std::vector<SignedRecord>& records, std::uint64_t e, bool after_later) {
    if (!committed(records, e)) return {};
    VT_ASSIGN_OR_RETURN(EpochCheck check,
                        check_epoch(source_, ctx_, records[e - 1], records[e], after_later));
    return record(std::move(check));
  }

  Status record(EpochCheck check, bool save = true) {
    if (save && !options_.online && !options_.state_dir.empty())
      VT_RETURN_IF_ERROR(save_check(options_.state_dir, check));
    const std::string e = std::to_string(check.epoch);
    const std::string what =
        check.passed             ? std::string("replay matches")
        : check.inconclusive()   ? std::string("not judged: ").append(check.irreproducible)
        : check.failures.empty() ? std::string("failed")
                                 : without_epoch_prefix(check.failures.front(), check.epoch);
    char took[64];
    std::snprintf(took, sizeof took, "replayed in %.2f s", check.replay_seconds);
    say("epoch " + e + ": " + what + " (" + (check.replayed ? took : "not replayed") +
        (save ? ")" : ", judged before the interruption)"));
    for (const std::string& n : check.replay_notes)
      verdict_.notes.push_back(std::string("epoch ").append(e).append(": ").append(n));
    const std::uint64_t epoch = check.epoch;
    verdict_.checks.push_back(std::move(check));
    progress(epoch, final_total_);
    return {};
  }

  void progress(std::uint64_t epoch, bool final) {
    final_total_ = final;
    if (!options_.on_progress) return;
    // Online, the plan is the stream's, still growing; offline it is verdict_.plan.
    const std::size_t challenged = std::max(verdict_.plan.challenged.size(), challenged_so_far_);
    options_.on_progress({verdict_.checks.size(), challenged, final, epoch});
  }

  // The offline challenges, with replays in child processes when more than one can run: each
  // epoch's snapshots are fetched and checked here, its replay is started, and the next epoch
  // is fetched while it runs; results are judged in the order the replays were started.
  Status challenge_all(const std::vector<SignedRecord>& records,
                       const std::vector<std::uint64_t>& epochs) {
    std::size_t jobs = options_.replay_jobs == 0
                           ? automatic_replay_jobs(task_, options_.trainer, epochs.size())
                           : options_.replay_jobs;
    jobs = std::min(jobs, epochs.size());
    // By memory as well as cores, when the user did not say: what is available now, less what
    // this process holds beside the replays at most (a start state and the delta it decodes).
    const std::size_t by_cores = jobs;
    std::uint64_t state = 0;
    for (const TensorEntry& t : ctx_.layout) state += t.nbytes();
    const std::uint64_t available =
        options_.available_memory != 0 ? options_.available_memory : available_memory();
    const std::uint64_t for_replays = available - std::min(available, 2 * state);
    if (options_.replay_jobs == 0 && jobs > 1) {
      jobs = std::min(jobs, replays_that_fit(for_replays, replay_peak_guess(state)));
      if (jobs < by_cores)
        say(memory_line(by_cores, jobs, replay_peak_guess(state), "guessed", for_replays));
    }
    if (jobs <= 1 || options_.replay_program.empty()) {
      for (std::uint64_t e : epochs) {
        if (!judged_.count(e))
          VT_RETURN_IF_ERROR(challenge(records, e, after_needed_later(records, epochs, e)));
      }
      sort_checks();
      return {};
    }
    std::unique_ptr<ReplayJobs> pool;  // made at the first replay
    std::deque<PreparedEpoch> started;
    std::size_t at_once = jobs;  // lowered once a worker measured what a replay takes
    auto finish_oldest = [&]() -> Status {
      auto replay = pool->finish_oldest();  // the replay of started.front()
      PreparedEpoch prepared = std::move(started.front());
      started.pop_front();
      if (!replay) {
        VT_ASSIGN_OR_RETURN(EpochCheck check, unreplayable(std::move(prepared), replay.error()));
        return record(std::move(check));
      }
      if (options_.replay_jobs == 0 && at_once > 1) {
        const std::size_t fit = replays_that_fit(for_replays, replay->peak_rss_bytes);
        if (fit < at_once) {
          at_once = fit;
          pool->retire_idle(at_once);  // an idle worker holds LibTorch and a model
          say(memory_line(by_cores, at_once, replay->peak_rss_bytes, "measured", for_replays));
        }
      }
      VT_RETURN_IF_ERROR(fetch_after_if_replay_missed(source_, ctx_, prepared, *replay));
      VT_ASSIGN_OR_RETURN(EpochCheck check,
                          judge_with_second_replay(std::move(prepared), *replay, source_, ctx_));
      return record(std::move(check));
    };
    for (std::uint64_t e : epochs) {
      if (judged_.count(e) || !committed(records, e)) continue;
      VT_ASSIGN_OR_RETURN(PreparedEpoch prepared,
                          prepare_epoch(source_, ctx_, records[e - 1], records[e],
                                        after_needed_later(records, epochs, e)));
      if (!prepared.replayable()) {
        VT_RETURN_IF_ERROR(record(std::move(prepared.check)));
        continue;
      }
      if (!pool) {
        VT_ASSIGN_OR_RETURN(pool, ReplayJobs::create(options_.replay_program, jobs, task_,
                                                     options_.trainer, ctx_.scratch));
        say("replaying up to " + std::to_string(jobs) + " epochs at once, in child processes");
      }
      while (pool->running() >= at_once) VT_RETURN_IF_ERROR(finish_oldest());
      VT_RETURN_IF_ERROR(pool->start(e, prepared.start));
      Bytes().swap(prepared.start);  // the child has it now; only "after" is needed to judge
      started.push_back(std::move(prepared));
    }
    while (!started.empty()) VT_RETURN_IF_ERROR(finish_oldest());
    sort_checks();
    return {};
  }

  // "cores for 2 replays, memory for 1 replay (...): replaying one epoch at a time".
  static std::string memory_line(std::size_t by_cores, std::size_t fit, std::uint64_t per_replay,
                                 const char* how, std::uint64_t available) {
    return "cores for " + std::to_string(by_cores) + " replays, memory for " + std::to_string(fit) +
           (fit == 1 ? " replay" : " replays") + " (" + size_text(static_cast<double>(per_replay)) +
           " each, " + how + "; " + size_text(static_cast<double>(available)) + " available): " +
           (fit == 1 ? std::string("replaying one epoch at a time")
                     : "replaying up to " + std::to_string(fit) + " epochs at once");
  }

  void sort_checks() {
    std::stable_sort(verdict_.checks.begin(), verdict_.checks.end(),
                     [](const EpochCheck& a, const EpochCheck& b) { return a.epoch < b.epoch; });
  }

  Result<Verdict> finish(const LogFacts& facts) {
    verdict_.log_failures = facts.failures;
    // No record read: its head would be all zeros, which reads like a real hash.
    verdict_.log_head = facts.records.empty() ? std::string() : hex_encode(facts.head);
    verdict_.provider_key = facts.signer_fingerprint;
    verdict_.provider_key_given = options_.provider_key.value_or("");
    for (const SignedRecord& r : facts.records)
      verdict_.claimed_loss.push_back(r.record.metrics.loss);
    for (const SignedRecord& r : facts.records)
      verdict_.claimed_eval.push_back(r.record.metrics.eval);
    verdict_.provider_key_pinned = facts.signer_pinned;
    if (!facts.records.empty() && facts.records.front().record.environment)
      verdict_.committed_environment = *facts.records.front().record.environment;
    if (!verdict_.environment_unmatched.empty()) {
      verdict_.environment_judge =
          what_would_judge(verdict_.environment_unmatched, verdict_.committed_environment);
    }
    if (!options_.provider_key && !facts.signer_fingerprint.empty()) {
      verdict_.notes.push_back(
          "the provider key was not pinned (no --provider-key): the log is signed by " +
          facts.signer_fingerprint + "; a log re-signed with anyone's key would pass too");
    }
    verdict_.bytes_fetched = source_.bytes_fetched();
    verdict_.finished = utc_now_iso8601();
    finalize_verdict(verdict_);
    return std::move(verdict_);
  }

  void say(const std::string& line) {
    if (options_.on_event) options_.on_event(line);
  }

  static std::string list(const std::vector<std::uint64_t>& v) {
    std::string out;
    for (std::uint64_t e : v) out += (out.empty() ? "" : ", ") + std::to_string(e);
    return out.empty() ? "(none)" : out;
  }

  std::unique_ptr<EvidenceSource> reuse_;
  EvidenceSource& source_;
  const Task& task_;
  const VerifyOptions& options_;
  CheckContext ctx_;
  Verdict verdict_;
  std::set<std::uint64_t> judged_;     // resumed: judged before the interruption
  bool final_total_ = false;           // every challenge is drawn
  std::size_t challenged_so_far_ = 0;  // online: drawn so far
};

}  // namespace

Result<Verdict> verify(EvidenceSource& source, const Task& task, const VerifyOptions& options) {
  // Large states wait on disk here rather than in memory (docs/verifier.md, "Memory").
  VT_ASSIGN_OR_RETURN(std::shared_ptr<ScratchFolder> scratch, ScratchFolder::create());
  Run run(source, task, options, std::move(scratch));
  return options.online ? run.online() : run.offline();
}

}  // namespace vt::verifier
