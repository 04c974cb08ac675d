// bench_dispute: what settling a dispute by one operator costs (docs/dispute.md), for the zoo
// gpt and cnn at their defaults, step 1 of epoch 1:
//   evidence_vs_state_<model>: operator evidence bytes over one committed state's, for the call a
//     cheater most plausibly changes (gpt: its first gelu; cnn: its first batch norm) and, as
//     _largest, for the step's call with the most operand bytes;
//   referee_ms_<model>: reading, checking and ruling on that evidence (veritrain referee's work);
//   numpy_referee_ms_<model>: reference/referee_ref.py on it, the interpreter's start included;
//   dispute_vs_step_replays_<model>: the auditor's extra work (its traced replay of the step from
//     the committed state, the comparison, the evidence) in replays of one untraced step (also
//     from the committed state: restoring it included on both sides), against a provider that
//     changed one value of that call's output (_largest: of the largest call; _last: of the
//     step's last call, the worst case: every call before it is hashed and compared);
//   dispute_agrees_vs_step_replays_<model>: the same replay and comparison against the honest
//     provider's trace, which agrees call for call (nothing to stop at);
//   dispute_cpu_vs_step_replays_<model>: the same in CPU time of all threads (the auditor hashes
//     new operands on a helper thread while its replay runs: docs/dispute.md);
//   trace_operand_mb_<model>, trace_hashed_mb_<model>: the step's operand bytes, and those hashed
//     (the rest are values the step already hashed, known again);
//   trace_on_vs_off_<model>: a traced step's time over an untraced one's; trace_off_ns_per_call:
//     a recording kernel's cost with no sink installed (an empty call, measured alone), and
//     trace_off_share_<model>: that times the step's calls over the step's time.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "bench/bench_util.h"
#include "common/file_io.h"
#include "dispute/referee.h"
#include "kernels/trace.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"
#include "verifier/audit/operator_audit.h"

namespace {

using vt::bench::best_seconds;
using vt::bench::Report;
namespace fs = std::filesystem;

struct Model {
  std::string name;
  std::string cheated_op;
};

// A provider that runs veritrain's kernels but moves one output value of call `index` of the
// step by one unit in the last place: its trace departs from the replay at that call.
class OneValueOff : public vt::dispute::ForwardingSink {
 public:
  explicit OneValueOff(std::int64_t index) : index_(index) {}
  void begin(std::string_view op, std::span<const vt::kernels::trace::Param> params,
             std::span<const vt::kernels::trace::Operand> inputs) override {
    current_ = calls_++ == index_;
    ForwardingSink::begin(op, params, inputs);
  }
  void end(std::span<const vt::kernels::trace::Operand> outputs) override {
    for (const auto& o : outputs) {
      if (!current_ || o.f32 == nullptr || o.count == 0) continue;
      auto* value = const_cast<float*>(o.f32);  // what other code would have written
      *value = std::nextafter(*value, std::numeric_limits<float>::infinity());
      break;
    }
    ForwardingSink::end(outputs);
  }

 private:
  std::int64_t index_, calls_ = 0;
  bool current_ = false;
};

// The index of the first call of `op`, or of the call with the most operand bytes when op is "".
std::int64_t pick_call(const std::vector<vt::dispute::TracedCall>& calls, const std::string& op) {
  std::int64_t best = 0, most = -1;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (!op.empty()) {
      if (calls[i].op == op) return static_cast<std::int64_t>(i);
      continue;
    }
    std::int64_t values = 0;
    for (const auto& o : calls[i].inputs) values += o.count;
    for (const auto& o : calls[i].outputs) values += o.count;
    if (values > most) {
      most = values;
      best = static_cast<std::int64_t>(i);
    }
  }
  return best;
}

template <typename T>
T must(vt::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "bench_dispute: %s: %s\n", what, r.error().message.c_str());
    std::exit(1);
  }
  return std::move(*r);
}

double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The wall time of one untraced step from the committed state (the best of three), and its CPU
// time in `cpu`.
double untraced_step_seconds(const vt::Task& task, const vt::Bytes& start, double& cpu) {
  cpu = 1e300;
  return best_seconds(3, [&] {
    const double cpu_start = process_cpu_seconds();
    auto trainer = must(vt::training::Trainer::restore(task, start), "restore");
    vt::training::EpochHooks hooks;
    hooks.on_step_end = [](std::int64_t) { return false; };
    must(trainer->train_epoch(hooks), "step");
    cpu = std::min(cpu, process_cpu_seconds() - cpu_start);
  });
}

void measure(Report& report, const Model& m, const fs::path& dir, double off_ns_per_call) {
  vt::Task task = must(vt::training::default_task(m.name, "synthetic"), "task");
  task.determinism = vt::Determinism::kPortable;
  const vt::Bytes start =
      must(must(vt::training::Trainer::create(task), "create")->snapshot(), "snapshot");
  const vt::SigningKey provider = *vt::SigningKey::generate(),
                       auditor = *vt::SigningKey::generate();

  double step_cpu = 0;
  const double step = untraced_step_seconds(task, start, step_cpu);
  vt::verifier::TracedStep traced;
  const double traced_step = best_seconds(
      3, [&] { traced = must(vt::verifier::trace_step(task, start, 1, 1, {}), "trace"); });
  auto signed_trace = must(vt::dispute::read_signed_trace(
                               vt::dispute::write_signed_trace(traced.trace, provider), "trace"),
                           "signed trace");
  const auto calls = static_cast<double>(traced.trace.calls.size());

  // The honest provider's trace: the replay hashes and compares every call.
  const double agrees = best_seconds(3, [&] {
    auto cmp = must(vt::verifier::compare_step(task, start, signed_trace, {}), "compare");
    if (cmp.departure) {
      std::fprintf(stderr, "bench_dispute: the honest trace departs at call %lld\n",
                   static_cast<long long>(cmp.departure->call));
      std::exit(1);
    }
  });
  report.add("dispute_agrees_vs_step_replays_" + m.name, agrees / step);

  for (const char* pick : {"", "_largest", "_last"}) {
    const std::string which = pick;
    const std::int64_t index =
        which == "_last" ? static_cast<std::int64_t>(traced.trace.calls.size()) - 1
                         : pick_call(traced.trace.calls, which.empty() ? m.cheated_op : "");
    const std::string suffix = m.name + which;
    // The cheating provider's trace and its values of the call (its work, not timed), then the
    // auditor's side: its own traced replay of the step, the comparison, the evidence.
    OneValueOff cheat(index), cheat_again(index);
    const auto cheated = must(vt::verifier::trace_step(task, start, 1, 1, {}, {}, &cheat), "cheat");
    const auto values =
        must(vt::verifier::trace_step(task, start, 1, 1, {}, index, &cheat_again), "values");
    const auto provider_trace =
        must(vt::dispute::read_signed_trace(
                 vt::dispute::write_signed_trace(cheated.trace, provider), "trace"),
             "signed trace");
    std::string text, shown;
    double cpu = 1e300;
    const double dispute = best_seconds(3, [&] {
      const double cpu_start = process_cpu_seconds();
      auto cmp = must(vt::verifier::compare_step(task, start, provider_trace, {}), "compare");
      if (!cmp.departure || cmp.departure->call != index ||
          cmp.departure->kind != vt::dispute::Departure::Kind::kOperator) {
        std::fprintf(stderr, "bench_dispute: the cheat at call %lld was not found there\n",
                     static_cast<long long>(index));
        std::exit(1);
      }
      auto evidence = must(vt::verifier::operator_evidence(provider_trace, *values.values,
                                                           cmp.auditor.header.calls_root),
                           "evidence");
      text = vt::dispute::write_operator_evidence(evidence, auditor);
      shown = evidence.disputed
                  ? evidence.disputed->output + "[" + std::to_string(evidence.disputed->index) + "]"
                  : "every operand whole";
      cpu = std::min(cpu, process_cpu_seconds() - cpu_start);
    });
    const fs::path file = dir / ("evidence-" + suffix + ".json");
    if (auto written = vt::write_file_atomic(file, text); !written.ok()) {
      std::fprintf(stderr, "bench_dispute: %s\n", written.error().message.c_str());
      std::exit(1);
    }
    bool against = false;
    const double referee = best_seconds(5, [&] {
      auto checked = must(vt::dispute::read_operator_evidence(text, file.string()), "read");
      against = !must(vt::dispute::rule(checked.evidence), "rule").provider_correct;
    });
    if (!against) {
      std::fprintf(stderr, "bench_dispute: the referee did not rule against the cheat\n");
      std::exit(1);
    }
    const std::string command = "/usr/bin/python3 " + std::string(VT_SOURCE_DIR) +
                                "/reference/referee_ref.py " + file.string() + " > /dev/null";
    const double numpy = best_seconds(3, [&] { (void)std::system(command.c_str()); });
    report.add("evidence_operator_" + suffix,
               traced.trace.calls[static_cast<std::size_t>(index)].op);
    report.add("evidence_shows_" + suffix, shown);
    report.add("evidence_bytes_" + suffix, text.size());
    report.add("evidence_vs_state_" + suffix,
               static_cast<double>(text.size()) / static_cast<double>(start.size()));
    report.add("referee_ms_" + suffix, referee * 1e3);
    report.add("numpy_referee_ms_" + suffix, numpy * 1e3);
    report.add("dispute_vs_step_replays_" + suffix, dispute / step);
    report.add("dispute_cpu_vs_step_replays_" + suffix, cpu / step_cpu);
  }
  report.add("state_bytes_" + m.name, start.size());
  report.add("step_ms_" + m.name, step * 1e3);
  report.add("trace_calls_" + m.name, calls);
  report.add("trace_operand_mb_" + m.name,
             static_cast<double>(traced.hashed_bytes + traced.repeated_bytes) / 1e6);
  report.add("trace_hashed_mb_" + m.name, static_cast<double>(traced.hashed_bytes) / 1e6);
  report.add("trace_on_vs_off_" + m.name, traced_step / step);
  report.add("trace_off_share_" + m.name, calls * off_ns_per_call * 1e-9 / step);
}

// What a recording kernel adds with no sink installed: its trace::Call, built and finished as
// relu's is (out of line in kernels/trace.cpp, so nothing is folded away).
double off_ns_per_call() {
  float x = 1.0f, y = 0.0f;
  constexpr int kCalls = 10'000'000;
  const double s = best_seconds(5, [&] {
    for (int i = 0; i < kCalls; ++i) {
      vt::kernels::trace::Call call("relu", {vt::kernels::trace::integer("n", 1)},
                                    {vt::kernels::trace::f32("x", &x, 1)});
      call.outputs({vt::kernels::trace::f32("y", &y, 1)});
    }
  });
  return s / kCalls * 1e9;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"bench_dispute: what settling a dispute by one operator costs"};
  std::string dir_arg;
  app.add_option("--dir", dir_arg, "Scratch folder for the evidence files (default: a temp one)");
  if (auto code = vt::bench::parse_flags(app, argc, argv)) return *code;
  Report report(argc, argv);
  const fs::path dir = dir_arg.empty() ? fs::temp_directory_path() /
                                             ("vt-bench-dispute-" + std::to_string(::getpid()))
                                       : fs::path(dir_arg);
  fs::create_directories(dir);
  const double per_call = off_ns_per_call();
  report.add("trace_off_ns_per_call", per_call);
  for (const Model& m : {Model{"gpt", "gelu"}, Model{"cnn", "batch_norm_train"}})
    measure(report, m, dir, per_call);
  if (dir_arg.empty()) fs::remove_all(dir);
  return 0;
} catch (const std::exception& e) {  // a scratch folder that cannot be made or removed
  std::fprintf(stderr, "bench_dispute: %s\n", e.what());
  return 1;
} catch (...) {
  std::fprintf(stderr, "bench_dispute: an exception that is not a std::exception\n");
  return 1;
}
