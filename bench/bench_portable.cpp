// bench_portable: what portable arithmetic costs (docs/benchmarks.md, "Portable arithmetic").
// gemm_vs_torch_mm: kernels::gemm against torch::mm (Debian's LibTorch calls its BLAS) at
// 512×512×512 and the gpt zoo model's linear shapes, the smallest ratio of the lot;
// step_vs_exact_<model>: the exact-mode step time over the portable one for the same task.
// One thread; each figure is the best of several runs, the two sides alternating.
//
// The peer a user would otherwise run is LibTorch on OpenBLAS (and oneDNN for convolutions):
// with --openblas DIR (Debian's libopenblas0-pthread unpacked, `make bench` does it) this
// program runs itself again with DIR first on LD_LIBRARY_PATH, so that the child's LibTorch
// loads OpenBLAS's libblas.so.3 and nothing else on the machine changes BLAS, and reports
// gemm_vs_openblas and step_vs_openblas_<model> (and _2t: both sides at 2 threads).
// portable_scaling_2t_<model>: the portable step at one thread over the step at two, the two
// alternating in this process.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace {

using vt::bench::best_seconds;
using vt::bench::Report;

struct Shape {
  const char* name;
  std::int64_t m, n, k;
};

double gflops(const Shape& s, double seconds) {
  return 2.0 * static_cast<double>(s.m * s.n * s.k) / seconds / 1e9;
}

const std::vector<Shape> kShapes = {{"512x512x512", 512, 512, 512},
                                    {"gpt_qkv", 1024, 192, 64},
                                    {"gpt_fc", 1024, 256, 64},
                                    {"gpt_out", 1024, 64, 256},
                                    {"gpt_qkv_backward_weight", 192, 64, 1024}};

double gemm_vs_torch(Report& report) {
  // The gpt's linear layers at its default batch (32 × 32 tokens, d_model 64, mlp_ratio 4).
  double smallest = 1e300;
  for (const Shape& s : kShapes) {
    const at::Tensor a = torch::rand({s.m, s.k}), b = torch::rand({s.k, s.n});
    at::Tensor c = torch::empty({s.m, s.n});
    double ours = 1e300, theirs = 1e300;
    for (int round = 0; round < 5; ++round) {
      ours = std::min(ours, best_seconds(1, [&] {
                        vt::kernels::gemm(s.m, s.n, s.k, {a.data_ptr<float>(), s.k, 1},
                                          {b.data_ptr<float>(), s.n, 1}, c.data_ptr<float>(), s.n);
                      }));
      theirs = std::min(theirs, best_seconds(1, [&] { at::mm_out(c, a, b); }));
    }
    report.add(std::string("gemm_gflops_") + s.name, gflops(s, ours));
    report.add(std::string("torch_mm_gflops_") + s.name, gflops(s, theirs));
    smallest = std::min(smallest, theirs / ours);
  }
  return smallest;
}

// What requestors bring (docs/portable.md, "Operators of real models"): torchvision's resnet18,
// mobilenet_v2 and efficientnet_b0 on 32x32 images, batch 16, and a torch.nn TransformerEncoder
// classifier (2 layers, d 32, 4 heads, dropout 0.1) on 16 steps of 32 features, scripted by
// Debian's python3-torch with the task each trains in (exact mode; the bench times portable
// beside it).
constexpr const char* kScripted = R"PY(
import hashlib, json, os, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torchvision.models as tvm
from make_digits import safetensors_bytes
from requestor_nets import Encoder
out = sys.argv[1]
rng = np.random.RandomState(0)
class WithLengths(torch.nn.Module):
    """torchaudio's conformer (forward(input, lengths) -> (output, lengths)), every row at full
    length, classified from its mean over time."""
    def __init__(self, model):
        super().__init__()
        self.model, self.fc = model, torch.nn.Linear(32, 10)
    def forward(self, x):
        n = torch.full([x.size(0)], x.size(1), dtype=torch.long)
        return self.fc(self.model(x, n)[0].mean(1))
def conformer():
    import torchaudio.models as tam
    return WithLengths(tam.Conformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2,
                                     depthwise_conv_kernel_size=7, dropout=0.1))
def fcn():  # torchvision's segmentation: a dict's "out", per-pixel classes
    import torchvision.models.segmentation as tvs
    return tvs.fcn_resnet50(num_classes=4, weights=None, weights_backbone=None)
models = {"resnet18": lambda: tvm.resnet18(num_classes=10),
          "mobilenet_v2": lambda: tvm.mobilenet_v2(num_classes=10),
          "efficientnet_b0": lambda: tvm.efficientnet_b0(num_classes=10),
          "transformer_encoder": lambda: Encoder(32), "conformer": conformer, "fcn": fcn}
for name in sys.argv[3].split(","):
    module = models[name]()
    shape = (256, 16, 32) if name in ("transformer_encoder", "conformer") else (256, 3, 32, 32)
    torch.jit.script(module).save(os.path.join(out, name + ".pt"))
    targets = rng.randint(0, 4, (256, 32, 32)) if name == "fcn" else rng.randint(0, 10, shape[0])
    data = safetensors_bytes({"inputs": ("F32", rng.rand(*shape).astype(np.float32)),
                              "targets": ("I64", targets.astype(np.int64))})
    open(os.path.join(out, name + ".safetensors"), "wb").write(data)
    sha = lambda b: hashlib.sha256(b).hexdigest()
    task = {"model": {"name": "torchscript", "path": name + ".pt",
                      "sha256": sha(open(os.path.join(out, name + ".pt"), "rb").read())},
            "dataset": {"name": "tensors", "path": ".",
                        "files": {name + ".safetensors": sha(data)}},
            "epochs": 1, "batch_size": 16, "determinism": "exact"}
    json.dump(task, open(os.path.join(out, name + ".json"), "w"))
)PY";

// Writes the scripted modules and their tasks into a fresh folder; nullopt (said on stderr) when
// Debian's python3-torchvision is missing.
std::optional<std::string> write_scripted(const std::vector<std::string>& names) {
  char dir[] = "/tmp/bench_portable_XXXXXX";
  if (::mkdtemp(dir) == nullptr) return std::nullopt;
  {
    std::ofstream script(std::string(dir) + "/scripted.py");
    script << kScripted;
  }
  const std::string command = "/usr/bin/python3 " + std::string(dir) + "/scripted.py " + dir + " " +
                              VT_SOURCE_DIR + "/scripts " + [&] {
                                std::string joined;
                                for (const auto& name : names)
                                  joined += (joined.empty() ? "" : ",") + name;
                                return joined;
                              }();
  if (std::system(command.c_str()) != 0) {
    std::cerr << "bench_portable: the scripted models need Debian's python3-torchvision and "
                 "python3-torchaudio\n";
    return std::nullopt;
  }
  return std::string(dir);
}

vt::training::TrainerOptions g_trainer_options;  // task_dir of the scripted models

std::unique_ptr<vt::training::Trainer> trainer_for(
    const vt::Task& task, const vt::training::TrainerOptions& options = g_trainer_options) {
  auto made = vt::training::Trainer::create(task, options);
  if (!made.ok()) {
    std::cerr << "bench_portable: " << made.error().message << "\n";
    std::exit(1);
  }
  return std::move(*made);
}

// Seconds per step of two trainers of one task, best of the rounds after a warm-up epoch each
// (allocator, caches), the two alternating: a shared machine's load moves both alike.
std::pair<double, double> alternating_step_seconds(vt::training::Trainer& a,
                                                   vt::training::Trainer& b, int rounds) {
  const double steps = static_cast<double>(a.steps_per_epoch());
  (void)a.train_epoch();
  (void)b.train_epoch();
  double best_a = 1e300, best_b = 1e300;
  for (int r = 1; r < rounds; ++r) {
    best_a = std::min(best_a, best_seconds(1, [&] { (void)a.train_epoch(); }));
    best_b = std::min(best_b, best_seconds(1, [&] { (void)b.train_epoch(); }));
  }
  return {best_a / steps, best_b / steps};
}

// Seconds per step of `task` in exact mode (LibTorch) and in portable mode, at `threads` (each
// trainer puts its thread counts in place before its epochs).
std::pair<double, double> step_seconds(vt::Task task, int rounds, int threads) {
  task.epochs = 1 + rounds;
  task.intra_op_threads = threads;
  vt::Task portable = task;
  portable.determinism = vt::Determinism::kPortable;
  std::unique_ptr<vt::training::Trainer> exact = trainer_for(task);
  std::unique_ptr<vt::training::Trainer> ours = trainer_for(portable);
  return alternating_step_seconds(*exact, *ours, rounds);
}

// Seconds per portable step of `task` at one thread and at two.
std::pair<double, double> scaling_seconds(vt::Task task, int rounds) {
  task.epochs = 1 + rounds;
  task.determinism = vt::Determinism::kPortable;
  vt::training::TrainerOptions one_thread = g_trainer_options, two_threads = g_trainer_options;
  one_thread.intra_op_threads = 1;
  two_threads.intra_op_threads = 2;
  std::unique_ptr<vt::training::Trainer> one = trainer_for(task, one_thread);
  std::unique_ptr<vt::training::Trainer> two = trainer_for(task, two_threads);
  return alternating_step_seconds(*one, *two, rounds);
}

// What the child with OpenBLAS loaded reports: the same alternating comparisons as the parent's
// (ours against LibTorch's, in one process), at `threads`, with the BLAS LibTorch loaded.
void peer_figures(Report& report, const std::vector<vt::Task>& tasks, int rounds, int threads) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libblas") != std::string::npos || line.find("openblas") != std::string::npos) {
      report.add("blas", line.substr(line.find('/')));
      break;
    }
  }
  at::set_num_threads(threads);
  vt::kernels::set_threads(threads);
  report.add("gemm_vs_torch_mm", gemm_vs_torch(report));
  for (const vt::Task& task : tasks) {
    const auto [exact, ours] = step_seconds(task, rounds, threads);
    report.add("step_ms_exact_" + task.model.name, exact * 1e3);
    report.add("step_ms_portable_" + task.model.name, ours * 1e3);
  }
}

// Runs this program as the OpenBLAS peer at `threads` and returns what it reported.
nlohmann::json run_peer(const std::string& openblas, const std::string& flags, int threads) {
  const std::string t = std::to_string(threads);
  const std::string command = "LD_LIBRARY_PATH='" + openblas + "' OPENBLAS_NUM_THREADS=" + t +
                              " /proc/" + std::to_string(::getpid()) + "/exe --peer " + t +
                              " --json " + flags;
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (pipe != nullptr && std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  if (pipe == nullptr || ::pclose(pipe) != 0) {
    std::cerr << "bench_portable: the OpenBLAS peer failed: " << command << "\n";
    std::exit(1);
  }
  return nlohmann::json::parse(out);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app("bench_portable: portable arithmetic against LibTorch's");
  int rounds = 4;
  std::int64_t steps = 10;
  int peer = 0;
  std::string openblas;
  app.add_option("--rounds", rounds, "Epochs timed per side (best of)")->capture_default_str();
  app.add_option("--steps", steps, "Steps per timed epoch")->capture_default_str();
  std::vector<std::string> models = {"gpt", "mlp", "cnn"};
  app.add_option("--models", models, "Zoo models whose steps are timed")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--openblas", openblas,
                 "Folder of Debian's libopenblas0-pthread libblas.so.3: LibTorch on OpenBLAS, "
                 "the peer (make bench unpacks it)")
      ->envname("VT_OPENBLAS_DIR");
  bool scripted = true;
  app.add_option("--scripted", scripted,
                 "Also time torchvision's CNNs and a TransformerEncoder, scripted")
      ->capture_default_str();
  std::vector<std::string> scripted_models = {
      "resnet18", "mobilenet_v2", "efficientnet_b0", "transformer_encoder", "fcn", "conformer"};
  app.add_option("--scripted-models", scripted_models, "Which scripted models are timed")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet18", "mobilenet_v2", "efficientnet_b0", "transformer_encoder",
                             "fcn", "conformer"}))
      ->capture_default_str();
  app.add_option("--peer", peer, "Internal: time LibTorch's side alone at this many threads");
  if (auto code = vt::bench::parse_flags(app, argc, argv)) return *code;
  Report report(argc, argv);
  std::vector<vt::Task> tasks;
  std::erase(models, std::string());  // --models '': the scripted models alone
  for (const std::string& model : models) {
    auto task = vt::training::default_task(model, "synthetic");
    if (!task.ok()) {
      std::cerr << "bench_portable: " << task.error().message << "\n";
      return 1;
    }
    task->steps_per_epoch = steps;
    tasks.push_back(*task);
  }
  if (peer > 0) {
    peer_figures(report, tasks, rounds, peer);
    return 0;
  }
  at::set_num_threads(1);
  vt::kernels::set_threads(1);
  report.add("threads", 1);
  report.add("gemm_vs_torch_mm", gemm_vs_torch(report));
  for (const vt::Task& task : tasks) {
    const std::string& model = task.model.name;
    const auto [exact, ours] = step_seconds(task, rounds, 1);
    report.add("step_ms_exact_" + model, exact * 1e3);
    report.add("step_ms_portable_" + model, ours * 1e3);
    report.add("step_vs_exact_" + model, exact / ours);
    const auto [one, two] = scaling_seconds(task, rounds);
    report.add("step_ms_portable_1t_" + model, one * 1e3);
    report.add("step_ms_portable_2t_" + model, two * 1e3);
    report.add("portable_scaling_2t_" + model, one / two);
  }
  if (scripted && !scripted_models.empty()) {
    if (auto dir = write_scripted(scripted_models)) {
      g_trainer_options.task_dir = *dir;
      for (const std::string& name : scripted_models) {
        auto task = vt::load_task(*dir + "/" + name + ".json");
        if (!task.ok()) {
          std::cerr << "bench_portable: " << task.error().message << "\n";
          return 1;
        }
        task->steps_per_epoch = steps;
        const auto [exact, ours] = step_seconds(*task, rounds, 1);
        report.add("step_ms_exact_" + name, exact * 1e3);
        report.add("step_ms_portable_" + name, ours * 1e3);
        report.add("step_vs_exact_" + name, exact / ours);
        if (name == "transformer_encoder" || name == "conformer") continue;
        // A verifier replaying a vision model uses its cores: two threads a side.
        const auto [exact_2t, ours_2t] = step_seconds(*task, rounds, 2);
        report.add("step_ms_exact_" + name + "_2t", exact_2t * 1e3);
        report.add("step_ms_portable_" + name + "_2t", ours_2t * 1e3);
        report.add("step_vs_exact_" + name + "_2t", exact_2t / ours_2t);
      }
      std::filesystem::remove_all(*dir);
      g_trainer_options = {};
    }
  }
  if (openblas.empty()) {
    report.add("openblas", "not measured: give --openblas DIR (make bench unpacks it)");
    return 0;
  }
  const std::string flags = "--scripted false --rounds " + std::to_string(rounds) + " --steps " +
                            std::to_string(steps) + " --models " + [&] {
                              std::string joined;
                              for (const auto& m : models)
                                joined += (joined.empty() ? "" : ",") + m;
                              return joined;
                            }();
  // Each ratio from one child process, the two sides alternating there as above.
  const nlohmann::json one = run_peer(openblas, flags, 1);
  const nlohmann::json two = run_peer(openblas, flags, 2);
  report.add("openblas", one.value("blas", std::string("?")));
  for (const Shape& s : kShapes) {
    const std::string key = std::string("torch_mm_gflops_") + s.name;
    report.add("openblas_gflops_" + std::string(s.name), one.at(key));
  }
  report.add("gemm_vs_openblas", one.at("gemm_vs_torch_mm"));
  for (const vt::Task& task : tasks) {
    const std::string& model = task.model.name;
    const auto ms = [&](const nlohmann::json& j, const char* side) {
      return j.at(std::string("step_ms_") + side + "_" + model).get<double>();
    };
    report.add("step_ms_openblas_" + model, ms(one, "exact"));
    report.add("step_vs_openblas_" + model, ms(one, "exact") / ms(one, "portable"));
    report.add("step_ms_openblas_" + model + "_2t", ms(two, "exact"));
    report.add("step_ms_portable_" + model + "_2t", ms(two, "portable"));
    report.add("step_vs_openblas_" + model + "_2t", ms(two, "exact") / ms(two, "portable"));
  }
  return 0;
} catch (const std::exception& e) {  // a peer's JSON without a key, LibTorch refusing a task
  std::cerr << "bench_portable: " << e.what() << "\n";
  return 1;
}
