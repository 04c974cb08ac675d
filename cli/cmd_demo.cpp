// `veritrain demo`: the whole flow on loopback with a default task. A provider process trains
// and serves over TLS; this process verifies it online, while it trains, then stops it. The
// provider runs in its own process because LibTorch's thread count and generators are
// process-wide: a replay in the same process would disturb the training it checks.
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli/app.h"
#include "common/file_io.h"
#include "common/process.h"
#include "protocol/keys.h"
#include "training/runtime.h"
#include "training/zoo/zoo.h"
#include "verifier/check/verify.h"
#include "verifier/report/report_folder.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

Result<int> run_demo(Context& ctx, const std::string& out_dir, std::int64_t epochs) {
  const bool cuda = training::runtime_info().cuda_available;
  const fs::path out = fs::absolute(out_dir);
  const fs::path work = out / "provider";
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::remove_all(out / "report", ec);
  fs::create_directories(work, ec);
  if (ec) return io_error("creating " + work.string() + ": " + ec.message());
  auto say = [](const std::string& s) { spdlog::info("demo: {}", s); };

  VT_ASSIGN_OR_RETURN(Task task, training::default_task("cnn", "synthetic"));
  task.epochs = epochs;
  task.steps_per_epoch = 6;
  task.model.options["width"] = 8;
  task.device = cuda ? Device::kCuda : Device::kCpu;
  // As task init chooses: portable arithmetic where it reaches (any verifier's CPU replays it).
  task.determinism =
      training::portable_reaches(task).ok() ? Determinism::kPortable : Determinism::kExact;
  if (task.determinism == Determinism::kPortable)
    task.portable_arithmetic = training::implemented_portable_arithmetic();
  const fs::path task_file = out / "task.json";
  VT_RETURN_IF_ERROR(write_file_atomic(task_file, pretty_task_json(task) + "\n"));
  say("task " + hex_encode(task_id(task)).substr(0, 16) +
      "...: a small ResNet on synthetic images, " + std::to_string(epochs) + " epochs on " +
      name_string(task.device) + ", " + name_string(task.determinism) + " arithmetic (" +
      task_file.string() + ")");

  VT_ASSIGN_OR_RETURN(IdentitySummary id, generate_identity(work / "keys"));
  say("provider keys made; TLS certificate pin " + id.tls_cert_fingerprint.substr(0, 16) + "...");
  Bytes token(24);
  if (RAND_bytes(token.data(), static_cast<int>(token.size())) != 1)
    return internal_error("OpenSSL RAND_bytes failed");
  const std::string token_text = hex_encode(token);
  VT_RETURN_IF_ERROR(write_file_atomic(work / "serve.token", token_text + "\n", 0600));

  // This process binds the port and the provider inherits it: the verifier connects at once and
  // waits in the backlog while the provider loads LibTorch, instead of polling until it is up.
  VT_ASSIGN_OR_RETURN(LoopbackListener listener, listen_on_loopback());
  const std::string port = std::to_string(listener.port);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  VT_ASSIGN_OR_RETURN(
      ChildProcess provider,
      ChildProcess::spawn(
          {self, "--log-level", "warn", "--json", "train", "--task", task_file.string(),
           "--workdir", (work / "dir").string(), "--key", (work / "keys").string(), "--serve",
           "fd:3", "--tls-cert", (work / "keys/tls.cert.pem").string(), "--tls-key",
           (work / "keys/tls.key.pem").string(), "--token-file", (work / "serve.token").string()},
          work / "provider.log", listener.fd.get()));
  listener.fd =
      Fd(-1);  // the provider's copy is the only one: if it exits, connecting fails at once
  say("provider started: training and serving on 127.0.0.1:" + port + " (log " +
      (work / "provider.log").string() + ")");

  ClientConfig config;
  config.host = "127.0.0.1";
  config.port = listener.port;
  config.token = token_text;
  config.pin_sha256 = id.tls_cert_fingerprint;
  config.connect_timeout =
      std::chrono::seconds(60);  // the handshake waits for the provider's start-up
  auto opened = verifier::open_provider_source(config);
  if (!opened) {
    const std::string why =
        provider.running() ? opened.error().message : "the provider process exited";
    return io_error(why + "; see " + (work / "provider.log").string());
  }
  std::unique_ptr<verifier::EvidenceSource> source = std::move(*opened);

  verifier::VerifyOptions o;
  o.provider_key = id.signing_fingerprint;  // the requestor got the provider's key out of band
  o.online = true;
  o.policy.confidence = 0.99;
  o.policy.cheat_fraction = 0.25;
  o.online_wait = std::chrono::minutes(10);
  o.trainer.task_dir = out;
  o.on_event = [&](const std::string& line) { say("verifier: " + line); };
  say("verifier: subscribing; each epoch is challenged with probability p as it is committed");
  VT_ASSIGN_OR_RETURN(verifier::Verdict verdict, verifier::verify(*source, task, o));
  provider.terminate();

  const fs::path report = out / "report";
  VT_ASSIGN_OR_RETURN(SigningKey key, load_or_create_signing_key(out / "verifier-keys"));
  const std::string next =
      verifier::next_step_command(verdict, task_file.string(), (work / "dir").string());
  VT_RETURN_IF_ERROR(verifier::write_report_folder(report, verdict, key, next));
  fs::remove_all(work / "dir" / "snapshots", ec);  // the bulky part; the log and report stay
  nlohmann::json j = verifier::verdict_to_json(verdict, key.public_key());
  j["ok"] = verdict.accepted;
  emit(ctx, j, verifier::verdict_summary(verdict, report));
  return verdict.accepted ? 0 : exit_code(Errc::kRejected);
}

}  // namespace

void register_demo(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("demo", summary_of("demo"));
  auto out = std::make_shared<std::string>("demo-out");
  auto epochs = std::make_shared<std::int64_t>(4);
  cmd->add_option("--out", *out, "Folder for the task, the provider's files and the report")
      ->capture_default_str();
  cmd->add_option("--epochs", *epochs, "Epochs to train")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->callback([&ctx, out, epochs] {
    ctx.action = [&ctx, out, epochs] { return run_demo(ctx, *out, *epochs); };
  });
}

}  // namespace vt::cli
