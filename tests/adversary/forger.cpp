// The forger: read, edit, re-commit, re-sign. Only the documented formats and the project's
// public readers and writers of them.

#include "tests/adversary/forger.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "common/sha256.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"

namespace vt::adversary {

Status commit_state(const Task& task, std::uint64_t epoch, ByteSpan state, CommitRecord& record) {
  const Digest id = task_id(task);
  record.root = fp::merkle_root(state);
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
  VT_ASSIGN_OR_RETURN(fp::Fingerprint f,
                      fp::fingerprint_snapshot(view, fp::commitment_seed(id, epoch, record.root),
                                               static_cast<std::uint64_t>(task.fingerprint.k)));
  VT_ASSIGN_OR_RETURN(
      fp::Fingerprint t,
      fp::fingerprint_snapshot(view, fp::tracking_seed(id),
                               static_cast<std::uint64_t>(task.fingerprint.tracking_k)));
  record.fingerprint = fp::fingerprint_to_json(f);
  record.tracking_fingerprint = fp::fingerprint_to_json(t);
  return {};
}

Result<nlohmann::json> fingerprint_over(ByteSpan state, const Digest& seed,
                                        const std::vector<std::string>& tensors, std::uint64_t k) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
  std::vector<TensorEntry> chosen;
  for (const TensorEntry& t : view.tensors) {
    for (const std::string& name : tensors) {
      if (t.name == name) chosen.push_back(t);
    }
  }
  VT_ASSIGN_OR_RETURN(fp::SamplePlan plan, fp::plan_samples(seed, chosen, k));
  VT_ASSIGN_OR_RETURN(fp::Fingerprint f, fp::gather(plan, view));
  return fp::fingerprint_to_json(f);
}

Result<Bytes> shift_tensor(ByteSpan state, const std::string& name, double fraction, float delta) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
  const TensorEntry* t = view.find(name);
  if (t == nullptr || t->dtype != DType::kF32)
    return invalid_input("forger: no F32 tensor " + name);
  Bytes out(state.begin(), state.end());
  const std::size_t data_at = static_cast<std::size_t>(view.data(*t).data() - state.data());
  const auto n = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(t->numel())));
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, out.data() + data_at + 4 * i, 4);
    v += delta;
    std::memcpy(out.data() + data_at + 4 * i, &v, 4);
  }
  return out;
}

Result<Bytes> fill_tensor(ByteSpan state, const std::string& name, std::uint8_t byte) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
  const TensorEntry* t = view.find(name);
  if (t == nullptr) return invalid_input("forger: no tensor " + name);
  Bytes out(state.begin(), state.end());
  const std::size_t data_at = static_cast<std::size_t>(view.data(*t).data() - state.data());
  std::memset(out.data() + data_at, byte, t->nbytes());
  return out;
}

Result<Bytes> add_tensor(ByteSpan state, const std::string& name, std::vector<std::int64_t> shape) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(state));
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  const Bytes zeros(static_cast<std::size_t>(numel) * 4, 0);
  std::vector<TensorData> tensors;
  for (const TensorEntry& t : view.tensors)
    tensors.push_back({{t.name, t.dtype, t.shape}, view.data(t)});
  tensors.push_back({{name, DType::kF32, std::move(shape)}, zeros});
  return write_canonical(tensors, view.metadata);
}

Status reforge_workdir(const std::filesystem::path& dir, const SigningKey& key,
                       const ForgeEdit& edit) {
  VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::open_existing(dir));
  VT_ASSIGN_OR_RETURN(LogFile log, read_log(w.log_file()));
  provider::SnapshotStore store(w.snapshots_dir(), {1, 1, 64});
  std::string text;
  Digest prev{};
  for (const SignedRecord& signed_record : log.records) {
    CommitRecord record = signed_record.record;
    VT_ASSIGN_OR_RETURN(Bytes state, store.load_canonical(record.root));
    VT_RETURN_IF_ERROR(edit(record.epoch, record, state));
    if (!store.load_container(record.root).ok())
      VT_RETURN_IF_ERROR(store.put(record.epoch, record.root, state, std::nullopt));
    record.prev = prev;
    VT_ASSIGN_OR_RETURN(SignedRecord resigned, sign_record(std::move(record), key));
    const Bytes line = encode_record(resigned);
    prev = sha256(line);
    text.append(line.begin(), line.end());
  }
  return write_file_atomic(w.log_file(), text);
}

}  // namespace vt::adversary
