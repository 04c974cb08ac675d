#include "verifier/check/replay_jobs.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/json.h"
#include "common/json_fields.h"
#include "protocol/log.h"
#include "training/prepared_task.h"

namespace vt::verifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A file's last lines, for an error message about a child that failed.
std::string tail_of(const fs::path& path) {
  auto text = read_text_file(path, std::uint64_t{16} << 20);
  if (!text.ok() || text->empty()) return "(no output)";
  std::string t = *text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  // The child reports as the CLI does; inside the parent's message its prefix is noise.
  const std::string prefix = "veritrain: error: ";
  for (std::size_t at; (at = t.find(prefix)) != std::string::npos;) t.erase(at, prefix.size());
  const std::size_t keep = 2000;
  return t.size() > keep ? "..." + t.substr(t.size() - keep) : t;
}

}  // namespace

ReplayJobs::ReplayJobs(std::shared_ptr<ScratchFolder> scratch) : scratch_(std::move(scratch)) {}

Result<std::unique_ptr<ReplayJobs>> ReplayJobs::create(const fs::path& program,
                                                       std::size_t capacity, const Task& task,
                                                       const training::TrainerOptions& trainer,
                                                       std::shared_ptr<ScratchFolder> scratch,
                                                       const std::vector<std::string>& env) {
  if (capacity == 0) return invalid_input("parallel replays: at least one job is needed");
  if (::access(program.c_str(), X_OK) != 0)
    return invalid_input("parallel replays: " + program.string() +
                         " is not an executable veritrain");
  if (!scratch) {
    VT_ASSIGN_OR_RETURN(scratch, ScratchFolder::create());
  }
  std::unique_ptr<ReplayJobs> jobs(new ReplayJobs(scratch));
  // The workers replay the task this verifier checks, byte for byte, not a file that might
  // have changed on disk since it was read.
  const fs::path task_file = jobs->own_file("task", ".json");
  VT_RETURN_IF_ERROR(scratch->write(task_file, as_bytes(canonical_task_json(task))));
  // The workers run in the same working directory, but an absolute folder says so explicitly
  // ("" is what the parent path of a bare "task.json" is).
  std::error_code ec;
  const fs::path task_dir =
      trainer.task_dir.empty() ? fs::current_path(ec) : fs::absolute(trainer.task_dir, ec);
  if (ec)
    return io_error("locating the task's folder " + trainer.task_dir.string() + ": " +
                    ec.message());
  std::vector<std::string> argv = {program.string(), "--log-level",
                                   "warn",           "replay-worker",
                                   "--task",         task_file.string(),
                                   "--task-dir",     task_dir.string(),
                                   "--threads",      std::to_string(trainer.intra_op_threads)};
  if (!trainer.device.empty()) {
    argv.push_back("--device");
    argv.push_back(trainer.device);
  }
  if (trainer.checkpoint_activations) argv.push_back("--checkpoint-activations");
  for (std::size_t i = 0; i < capacity; ++i) {
    const fs::path log = jobs->own_file("worker", ".log");
    VT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn_talking(argv, log, env));
    jobs->workers_.push_back(Worker{std::move(child), log, false});
  }
  return jobs;
}

ReplayJobs::~ReplayJobs() {
  workers_.clear();  // each ChildProcess ends its worker
  std::error_code ignored;
  for (const fs::path& f : own_files_) fs::remove(f, ignored);
}

fs::path ReplayJobs::own_file(const std::string& stem, const std::string& suffix) {
  own_files_.push_back(scratch_->fresh_name(stem, suffix));
  return own_files_.back();
}

Error ReplayJobs::worker_failed(Worker& w, const std::string& what, const std::string& why) {
  const int code = w.child.wait();  // it is gone or broken: reap it for its exit code
  return Error{Errc::kInternal, what + " failed (" + why + ", exit " + std::to_string(code) +
                                    "): " + tail_of(w.log)};
}

Status ReplayJobs::start(std::uint64_t epoch, ByteSpan start) {
  std::size_t idle = workers_.size();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].busy) {
      idle = i;
      break;
    }
  }
  if (idle == workers_.size())
    return internal_error("parallel replays: all " + std::to_string(workers_.size()) +
                          " jobs are busy");
  const std::string stem = "epoch-" + std::to_string(epoch);
  Job job{epoch, idle, scratch_->fresh_name(stem + "-before", ".safetensors"),
          scratch_->fresh_name(stem + "-after", ".safetensors")};
  VT_RETURN_IF_ERROR(scratch_->write(job.before, start));
  const json request = {
      {"epoch", epoch}, {"from", job.before.string()}, {"out", job.after.string()}};
  Worker& w = workers_[idle];
  if (Status sent = w.child.write_line(request.dump()); !sent) {
    std::error_code ignored;
    fs::remove(job.before, ignored);
    return worker_failed(w, "replaying epoch " + std::to_string(epoch) + " in a child process",
                         sent.error().message);
  }
  w.busy = true;
  jobs_.push_back(std::move(job));
  return {};
}

// The figures of a worker's successful answer.
Result<Replay> replay_of(const JsonFields& r) {
  Replay replay;
  std::string hex;
  // The root is the worker's own hash of the bytes it wrote: this verifier's code, hashing on a
  // core the parent does not need.
  VT_RETURN_IF_ERROR(r.string("root", hex, true));
  VT_ASSIGN_OR_RETURN(replay.root, digest_from_hex(hex, r.path_of("root")));
  VT_RETURN_IF_ERROR(r.string("data_order_digest", hex, true));
  VT_ASSIGN_OR_RETURN(replay.data_order_digest,
                      digest_from_hex(hex, r.path_of("data_order_digest")));
  VT_RETURN_IF_ERROR(r.strings("notes", replay.notes, true));
  VT_RETURN_IF_ERROR(r.number("seconds", replay.seconds, true));
  // The loss travels as its bits: the parent compares them exactly.
  std::uint64_t bits = 0;
  VT_RETURN_IF_ERROR(r.unsigned64("loss_bits", bits, true));
  replay.loss = std::bit_cast<double>(bits);
  VT_RETURN_IF_ERROR(r.unsigned64("steps", replay.steps, true));
  VT_RETURN_IF_ERROR(r.unsigned64("samples", replay.samples, true));
  VT_RETURN_IF_ERROR(r.unsigned64("peak_rss_bytes", replay.peak_rss_bytes, true));
  VT_ASSIGN_OR_RETURN(const json* trail, r.find("trail", true, "an array"));
  if (!trail->is_array()) return r.wrong("trail", "an array", *trail);
  replay.trail.assign(trail->begin(), trail->end());
  if (r.value().contains("eval")) {  // held-out metrics, also as bits
    VT_ASSIGN_OR_RETURN(const JsonFields eval, r.child("eval", true));
    EvalClaim claim;
    VT_RETURN_IF_ERROR(eval.unsigned64("loss_bits", bits, true));
    claim.loss = std::bit_cast<double>(bits);
    if (eval.value().contains("accuracy_bits")) {
      VT_RETURN_IF_ERROR(eval.unsigned64("accuracy_bits", bits, true));
      claim.accuracy = std::bit_cast<double>(bits);
    }
    VT_RETURN_IF_ERROR(eval.unsigned64("examples", claim.examples, true));
    replay.eval = claim;
  }
  return replay;
}

// One answer line of a replay worker (run_replay_worker below): the replay's figures, or the
// worker's failure with the exit code that says whose fault it was (docs/cli.md). The worker is
// this program, so an answer it cannot have written is a bug here, never the provider's.
Result<Replay> read_answer(const std::string& line, const std::string& what) {
  auto parsed = parse_json(line, what + ": its answer");
  if (!parsed || !parsed->is_object())
    return internal_error(what + ": unreadable answer" +
                          (parsed ? std::string() : ": " + parsed.error().message));
  const JsonFields r(*parsed, what + ": its answer");
  bool ok = false;
  if (Status read = r.boolean("ok", ok, true); !read) return internal_error(read.error().message);
  if (!ok) {
    std::int64_t code = 0;
    std::string error;
    if (Status read = r.integer("code", code, true); !read)
      return internal_error(read.error().message);
    if (Status read = r.string("error", error, true); !read)
      return internal_error(read.error().message);
    Errc errc = Errc::kInternal;
    for (Errc c : {Errc::kRejected, Errc::kInvalidInput, Errc::kIo})
      if (code == exit_code(c)) errc = c;
    return Error{errc, what + " failed (exit " + std::to_string(code) + "): " + error};
  }
  auto replay = replay_of(r);
  if (!replay) return internal_error(replay.error().message);
  return replay;
}

Result<Replay> ReplayJobs::finish_oldest() {
  if (jobs_.empty()) return internal_error("parallel replays: none is running");
  const Job job = std::move(jobs_.front());
  jobs_.pop_front();
  Worker& w = workers_[job.worker];
  w.busy = false;
  const std::uint64_t epoch = job.epoch;
  const std::string what = "replaying epoch " + std::to_string(epoch) + " in a child process";
  std::error_code ignored;
  // The answer carries the replay's trail, as large as a committed record's may be.
  auto line = w.child.read_line(kMaxRecordBytes);
  fs::remove(job.before, ignored);
  if (!line) {
    fs::remove(job.after, ignored);
    return worker_failed(w, what, line.error().message);
  }
  auto r = read_answer(*line, what);
  if (!r) {
    fs::remove(job.after, ignored);
    return r.error();
  }
  // The state stays in its file, read back a position at a time to be judged.
  VT_ASSIGN_OR_RETURN(r->state_file, StateFile::adopt(scratch_, job.after, r->root));
  return r;
}

void ReplayJobs::retire_idle(std::size_t keep) {
  for (std::size_t i = workers_.size(); i-- > 0 && workers_.size() > keep;) {
    if (workers_[i].busy) continue;
    workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(i));  // ends the child
    for (Job& job : jobs_)
      if (job.worker > i) --job.worker;
  }
}

std::size_t automatic_replay_jobs(const Task& task, const training::TrainerOptions& trainer,
                                  std::size_t epochs) {
  const std::string device = training::run_device(task, trainer);
  if (device.rfind("cuda", 0) == 0 || epochs < 2) return 1;
  const std::int64_t threads = std::max<std::int64_t>(1, training::run_threads(task, trainer));
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(cores / static_cast<std::size_t>(threads), 1, epochs);
}

std::uint64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::numeric_limits<std::uint64_t>::max();
}

std::uint64_t peak_resident_bytes() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux counts KiB
}

std::uint64_t replay_peak_guess(std::uint64_t snapshot_bytes) {
  return (std::uint64_t{512} << 20) + 4 * snapshot_bytes;
}

std::size_t replays_that_fit(std::uint64_t available, std::uint64_t per_replay) {
  if (per_replay == 0 || available == std::numeric_limits<std::uint64_t>::max())
    return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(std::max<std::uint64_t>(1, available / per_replay));
}

Status run_replay_worker(const ReplayWorkerArgs& args, std::istream& in, std::ostream& out_lines) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(args.task.string()));
  CheckContext ctx;
  ctx.task = &task;
  ctx.task_id = task_id(task);
  ctx.trainer = args.trainer;
  // One trainer for the worker's life, each request's state loaded into it: built here, while
  // the verifier fetches the first state.
  VT_ASSIGN_OR_RETURN(ctx.replayer, training::Trainer::create(task, args.trainer));
  for (std::string line; std::getline(in, line);) {
    VT_ASSIGN_OR_RETURN(const json request, parse_json(line, "replay-worker: request"));
    if (!request.is_object()) return invalid_input("replay-worker: request: not an object");
    const JsonFields fields(request, "replay-worker: request");
    std::string from_text, out_text;
    VT_RETURN_IF_ERROR(fields.string("from", from_text, true));
    VT_RETURN_IF_ERROR(fields.string("out", out_text, true));
    const fs::path from = from_text, out = out_text;
    auto replayed = [&]() -> Result<Replay> {
      VT_ASSIGN_OR_RETURN(Bytes start, read_file(from));
      // Streamed into the scratch file the parent reads only after this answer: the worker
      // never holds the replayed state beside the trainer's.
      return replay_here(ctx, std::move(start), &out);
    }();
    json answer;
    if (replayed) {
      answer = {{"ok", true},
                {"root", hex_encode(replayed->root)},
                {"data_order_digest", hex_encode(replayed->data_order_digest)},
                {"notes", replayed->notes},
                {"seconds", replayed->seconds},
                {"loss_bits", std::bit_cast<std::uint64_t>(replayed->loss)},
                {"steps", replayed->steps},
                {"samples", replayed->samples},
                {"trail", replayed->trail},
                {"peak_rss_bytes", peak_resident_bytes()}};
      if (const auto& e = replayed->eval) {
        answer["eval"] = {{"loss_bits", std::bit_cast<std::uint64_t>(e->loss)},
                          {"examples", e->examples}};
        if (e->accuracy)
          answer["eval"]["accuracy_bits"] = std::bit_cast<std::uint64_t>(*e->accuracy);
      }
    } else {
      answer = {{"ok", false},
                {"code", exit_code(replayed.error().code)},
                {"error", replayed.error().message}};
    }
    out_lines << answer.dump() << '\n' << std::flush;
    if (!out_lines) return io_error("replay-worker: its verifier stopped listening");
  }
  return {};
}

}  // namespace vt::verifier
