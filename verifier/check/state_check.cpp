// What a fetched committed state must satisfy beyond hashing to its root (docs/verifier.md,
// "Everything committed is checked"). The root binds the bytes; these checks bind the bytes to
// the task: a provider chooses every byte it commits, so nothing in them - metadata, tensor
// list, fingerprint plan - is taken on trust.

#include "verifier/check/state_check.h"

#include <cstdlib>

#include "common/text.h"
#include "fingerprint/fingerprint.h"

namespace vt::verifier {
namespace {

bool is_count(const std::string& v, bool positive) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    return false;
  if (v.size() > 1 && v[0] == '0') return false;
  return !positive || std::strtoull(v.c_str(), nullptr, 10) > 0;
}

// Values the provider chose, quoted for a message: escaped and cut short (common/text.h).
std::string quoted(const std::string& v) { return printable(v).insert(0, 1, '"') + '"'; }

// Metadata must agree with the task and the epoch. In tolerance mode the thread count and device
// class may differ from the task's (the replay notes it); they must still be well-formed.
void check_metadata(const SafetensorsView& view, std::uint64_t epoch, const CheckContext& ctx,
                    std::vector<std::string>& out) {
  const Task& task = *ctx.task;
  const bool exact = replays_bit_for_bit(task);
  auto get = [&](const char* key) -> const std::string* {
    auto it = view.metadata.find(key);
    if (it != view.metadata.end()) return &it->second;
    out.push_back(std::string("metadata lacks \"") + key + "\"");
    return nullptr;
  };
  auto must_equal = [&](const char* key, const std::string& want) {
    const std::string* v = get(key);
    if (v && *v != want)
      out.push_back(std::string("metadata ") + key + " is " + quoted(*v) + ", the task says " +
                    quoted(want));
  };
  must_equal("format", training::kSnapshotFormat);
  must_equal("task_id", hex_encode(ctx.task_id));
  must_equal("precision", name_string(task.precision));
  must_equal("epoch", std::to_string(epoch));
  if (view.metadata.count("data_cursor")) must_equal("data_cursor", std::to_string(epoch));
  if (const std::string* g = get("global_step"); g && !is_count(*g, false)) {
    out.push_back("metadata global_step " + quoted(*g) + " is not a count");
  }
  if (const std::string* t = get("intra_op_threads")) {
    if (!is_count(*t, true)) {
      out.push_back("metadata intra_op_threads " + quoted(*t) + " is not a thread count");
    } else if (exact && *t != std::to_string(task.intra_op_threads)) {
      out.push_back("metadata intra_op_threads is " + quoted(*t) + ", the task says " +
                    std::to_string(task.intra_op_threads) + " (exact mode)");
    }
  }
  if (const std::string* d = get("device")) {
    if (!enum_named<Device>(*d)) {
      out.push_back("metadata device " + quoted(*d) + " is not cpu or cuda");
    } else if (exact && *d != name_of(task.device)) {
      out.push_back("metadata device is " + quoted(*d) + ", the task says " +
                    quoted(name_string(task.device)) + " (exact mode)");
    }
  }
}

std::string shape_text(const TensorEntry& t) {
  std::string s(dtype_name(t.dtype));
  s += '[';
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(t.shape[i]);
  }
  s += ']';
  return s;
}

// The state holds exactly the task's tensors. rng/cuda exists only for states made on a GPU, so
// it is neither required nor refused (its dtype is checked on restore).
void check_layout(const SafetensorsView& view, const std::vector<TensorEntry>& layout,
                  std::vector<std::string>& out) {
  for (const TensorEntry& want : layout) {
    if (want.name == "rng/cuda") continue;
    const TensorEntry* got = view.find(want.name);
    if (got == nullptr) {
      out.push_back("tensor " + want.name + " is missing (the task's model needs " +
                    shape_text(want) + ")");
    } else if (got->dtype != want.dtype || got->shape != want.shape) {
      out.push_back("tensor " + want.name + " is " + shape_text(*got) +
                    ", the task's model needs " + shape_text(want));
    }
  }
  for (const TensorEntry& got : view.tensors) {
    if (got.name == "rng/cuda") continue;
    bool known = false;
    for (const TensorEntry& want : layout) known = known || want.name == got.name;
    if (!known) out.push_back("tensor " + printable(got.name) + " is not part of the task's model");
  }
}

// A committed fingerprint must be the one recomputed from the state's own bytes at the positions
// `seed` and `k` derive over the state's (already checked) tensors: plan and values alike.
void check_fingerprint(const char* what, const nlohmann::json& committed_json,
                       const SafetensorsView& view, const Digest& seed, std::int64_t k,
                       std::vector<std::string>& out) {
  auto committed = fp::fingerprint_from_json(committed_json);
  if (!committed) {
    out.push_back(std::string("committed ") + what + " is malformed: " + committed.error().message);
    return;
  }
  auto own = fp::fingerprint_snapshot(view, seed, static_cast<std::uint64_t>(k));
  if (!own) {
    out.push_back(std::string("the ") + what +
                  " the task derives cannot be taken: " + own.error().message);
    return;
  }
  if (committed->plan != own->plan) {
    out.push_back(std::string("committed ") + what +
                  " samples other positions than the task derives (k " + std::to_string(k) +
                  ", its tensor list, its seed)");
  } else if (committed->values != own->values) {
    out.push_back(std::string("committed ") + what +
                  " does not match the committed snapshot's values");
  }
}

}  // namespace

std::vector<TensorEntry> layout_of(const SafetensorsView& view) {
  std::vector<TensorEntry> out = view.tensors;
  for (TensorEntry& t : out) t.begin = t.end = 0;
  return out;
}

Result<CheckContext> make_check_context(const Task& task, const training::TrainerOptions& trainer,
                                        FetchAfter fetch_after) {
  CheckContext ctx;
  ctx.task = &task;
  ctx.task_id = task_id(task);
  ctx.trainer = trainer;
  ctx.fetch_after = fetch_after;
  VT_ASSIGN_OR_RETURN(auto initial, training::Trainer::create(task, trainer));
  ctx.layout = initial->layout();
  ctx.steps_per_epoch = initial->steps_per_epoch();
  ctx.replayer = std::move(initial);
  return ctx;
}

Result<fp::SamplePlan> expected_commitment_plan(const CheckContext& ctx,
                                                const CommitRecord& record) {
  if (ctx.layout.empty()) return internal_error("check context without the task's layout");
  return fp::plan_samples(fp::commitment_seed(ctx.task_id, record.epoch, record.root), ctx.layout,
                          static_cast<std::uint64_t>(ctx.task->fingerprint.k));
}

std::vector<std::string> check_committed_state(ByteSpan canonical, const SignedRecord& record,
                                               const CheckContext& ctx) {
  const CommitRecord& r = record.record;
  std::vector<std::string> problems;
  auto view = parse_safetensors(canonical);
  if (!view) {
    problems.push_back("it is not a canonical snapshot: " + view.error().message);
  } else {
    check_metadata(*view, r.epoch, ctx, problems);
    check_layout(*view, ctx.layout, problems);
    if (problems.empty()) {
      check_fingerprint("fingerprint", r.fingerprint, *view,
                        fp::commitment_seed(ctx.task_id, r.epoch, r.root), ctx.task->fingerprint.k,
                        problems);
      check_fingerprint("tracking fingerprint", r.tracking_fingerprint, *view,
                        fp::tracking_seed(ctx.task_id), ctx.task->fingerprint.tracking_k, problems);
    }
  }
  return problems;
}

}  // namespace vt::verifier
