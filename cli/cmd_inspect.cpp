// `veritrain inspect`: describe a workdir, task, commitment log, snapshot or container, and take
// one epoch's state or one container section out of it.
#include <filesystem>
#include <sstream>

#include "cli/app.h"
#include "cli/workdir_report.h"
#include "common/activity.h"
#include "common/file_io.h"
#include "common/safetensors.h"
#include "common/text.h"
#include "compression/container.h"
#include "protocol/log.h"
#include "protocol/task.h"
#include "provider/check.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

Result<int> inspect_file(const Context& ctx, const fs::path& path, int extract,
                         const std::string& out) {
  VT_RETURN_IF_ERROR(check_input_file(path, "inspect:"));
  const Activity reading("reading " + path.string() + " whole");
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(path));
  if (auto info = comp::read_container_info(bytes); info.ok()) {
    if (extract >= 0) {
      VT_ASSIGN_OR_RETURN(comp::ExtractedSection s,
                          comp::extract_section(bytes, static_cast<std::uint32_t>(extract)));
      if (out.empty()) return invalid_input("--extract needs --out FILE");
      VT_RETURN_IF_ERROR(write_file_atomic(out, s.payload));
      const char* tool = s.format == comp::FrameFormat::kZstd ? "zstd -d"
                         : s.format == comp::FrameFormat::kXz ? "xz -d"
                                                              : "none (stored)";
      emit(ctx, {{"section", extract}, {"out", out}, {"decode_with", tool}},
           "wrote section " + std::to_string(extract) + " to " + out + " (decode with " + tool +
               ")\n");
      return 0;
    }
    nlohmann::json sections = nlohmann::json::array();
    for (const auto& s : info->sections) {
      sections.push_back({{"index", s.index},
                          {"name", s.name},
                          {"chunk", s.chunk},
                          {"method", comp::method_name(s.method)},
                          {"raw_size", s.raw_size},
                          {"stored_size", s.payload_size}});
    }
    // The header alone says nothing about the payload: every section's checksums are checked,
    // and a whole (non-delta) container is decoded to its root. A delta needs its base, which
    // `log verify --workdir` has.
    std::vector<std::string> problems;
    for (const auto& s : info->sections) {
      if (auto payload = comp::extract_section(bytes, s.index); !payload)
        problems.push_back(payload.error().message);
    }
    if (problems.empty() && !info->base_root) {
      if (auto decoded = comp::decode(bytes); !decoded) problems.push_back(decoded.error().message);
    }
    nlohmann::json j = {{"kind", "snapshot container"},   {"codec", comp::codec_name(info->codec)},
                        {"raw_size", info->raw_size},     {"container_size", info->container_size},
                        {"root", hex_encode(info->root)}, {"sections", sections},
                        {"intact", problems.empty()},     {"problems", problems}};
    if (info->base_root) j["base_root"] = hex_encode(*info->base_root);
    std::ostringstream h;
    h << "snapshot container, codec " << comp::codec_name(info->codec) << ", " << info->raw_size
      << " -> " << info->container_size << " bytes ("
      << static_cast<double>(info->raw_size) / static_cast<double>(info->container_size) << "x), "
      << info->sections.size() << " sections\nroot " << hex_encode(info->root) << "\n";
    if (info->base_root) h << "delta against " << hex_encode(*info->base_root) << "\n";
    for (const std::string& p : problems) h << "CORRUPT: " << p << "\n";
    if (problems.empty()) {
      h << (info->base_root
                ? "every section's checksums hold (the delta's base is not checked)\n"
                : "intact: every section's checksums hold and it decodes to its root\n");
    }
    j["ok"] = problems.empty();
    emit(ctx, j, h.str());
    return problems.empty() ? 0 : exit_code(Errc::kRejected);
  }
  if (auto view = parse_safetensors(bytes, Canonical::kAllowAny); view.ok()) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : view->tensors)
      tensors.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
    const bool canonical = parse_safetensors(bytes).ok();
    std::ostringstream h;
    h << "safetensors, " << view->tensors.size() << " tensors"
      << (canonical ? " (canonical)" : " (not canonical)") << "\n";
    for (const auto& t : view->tensors) {
      h << "  " << t.name << "  " << dtype_name(t.dtype) << " [";
      for (std::size_t i = 0; i < t.shape.size(); ++i) h << (i ? ", " : "") << t.shape[i];
      h << "]\n";
    }
    emit(ctx,
         {{"kind", "safetensors"},
          {"canonical", canonical},
          {"metadata", view->metadata},
          {"tensors", tensors}},
         h.str());
    return 0;
  }
  if (auto log = read_log(bytes, path.string()); log.ok() && !log->records.empty()) {
    nlohmann::json recs = nlohmann::json::array();
    for (const auto& r : log->records) {
      const std::optional<EvalClaim>& e = r.record.metrics.eval;
      recs.push_back(
          {{"epoch", r.record.epoch},
           {"root", hex_encode(r.record.root)},
           {"loss",
            r.record.epoch == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.record.metrics.loss)},
           {"eval", e ? nlohmann::json{{"loss", e->loss},
                                       {"accuracy", e->accuracy ? nlohmann::json(*e->accuracy)
                                                                : nlohmann::json(nullptr)},
                                       {"examples", e->examples}}
                      : nlohmann::json(nullptr)}});
    }
    std::ostringstream h;
    h << "commitment log, " << log->records.size() << " records, task_id "
      << hex_encode(log->records.front().record.task_id)
      << " (not checked: `veritrain log verify` checks it)\n";
    for (const auto& r : log->records) {
      h << "  epoch " << r.record.epoch << "  root " << hex_encode(r.record.root).substr(0, 16)
        << "...  ";
      if (r.record.epoch == 0) {
        h << "initial state\n";
        continue;
      }
      h << "loss " << r.record.metrics.loss;
      if (const std::optional<EvalClaim>& e = r.record.metrics.eval) {
        h << "  held-out loss " << e->loss;
        if (e->accuracy) h << " accuracy " << *e->accuracy * 100.0 << "%";
      }
      h << "\n";
    }
    emit(ctx,
         {{"kind", "commitment log"},
          {"task_id", hex_encode(log->records.front().record.task_id)},
          {"records", recs}},
         h.str());
    return 0;
  }
  std::string text(bytes.begin(), bytes.end());
  if (auto task = parse_task(text, path.string()); task.ok()) {
    emit(ctx,
         {{"kind", "task"},
          {"task_id", hex_encode(task_id(*task))},
          {"task", nlohmann::json::parse(canonical_task_json(*task))}},
         "task, task_id " + hex_encode(task_id(*task)) +
             " (`veritrain task show` prints its fields)\n");
    return 0;
  }
  return invalid_input(path.string() +
                       ": not a workdir, task, commitment log, snapshot or snapshot container");
}

// The committed state of one epoch as a plain safetensors file: the model a requestor takes
// home, or the input of any other tool. Decoding checks it against the committed root.
Result<int> export_epoch(const Context& ctx, const fs::path& dir, std::uint64_t epoch,
                         const std::string& out) {
  if (out.empty()) return invalid_input("--epoch needs --out FILE");
  VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::open_existing(dir));
  VT_ASSIGN_OR_RETURN(LogFile log, read_log(w.log_file()));
  if (auto checked = verify_log(log.records, w.task_id(), std::nullopt, w.log_file().string());
      !checked) {
    return rejected(checked.error().message);
  }
  if (epoch >= log.records.size()) {
    return invalid_input("--epoch " + std::to_string(epoch) + ": the workdir commits epochs 0.." +
                         std::to_string(log.records.size()) + " (exclusive)");
  }
  const Digest root = log.records[epoch].record.root;
  provider::SnapshotStore store(w.snapshots_dir(), {});
  VT_ASSIGN_OR_RETURN(Bytes canonical, store.load_canonical(root));
  VT_RETURN_IF_ERROR(write_file_atomic(out, canonical));
  emit(ctx,
       {{"epoch", epoch}, {"root", hex_encode(root)}, {"out", out}, {"bytes", canonical.size()}},
       "wrote epoch " + std::to_string(epoch) + " (" + std::to_string(canonical.size()) +
           " bytes, root " + hex_encode(root) + ") to " + out + "\n");
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, Context& ctx) {
  struct InspectArgs {
    std::string path, out;
    int extract = -1;
    std::int64_t epoch = -1;
  };
  auto a = std::make_shared<InspectArgs>();
  auto* inspect = app.add_subcommand("inspect", summary_of("inspect"));
  inspect->add_option("path", a->path, "What to describe")->required();
  inspect->add_option("--extract", a->extract,
                      "Container: write section N's stored payload (a zstd or xz frame) to --out");
  inspect->add_option("--epoch", a->epoch,
                      "Workdir: write epoch E's canonical snapshot (safetensors) to --out");
  inspect->add_option("--out", a->out, "Where --extract or --epoch writes");
  inspect->callback([&ctx, a] {
    ctx.action = [&ctx, a]() -> Result<int> {
      if (fs::is_directory(a->path) && a->epoch >= 0)
        return export_epoch(ctx, a->path, static_cast<std::uint64_t>(a->epoch), a->out);
      if (fs::is_directory(a->path)) {
        VT_ASSIGN_OR_RETURN(provider::WorkdirReport r,
                            provider::check_workdir(a->path, /*decode_snapshots=*/false));
        nlohmann::json j = report_json(r);
        j["kind"] = "workdir";
        emit(ctx, j, report_text(r));
        return 0;
      }
      return inspect_file(ctx, a->path, a->extract, a->out);
    };
  });
}

}  // namespace vt::cli
