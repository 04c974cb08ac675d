#include "training/estimate.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <malloc.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "training/data/data.h"

#if defined(VT_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace vt::training {
namespace {

// Wraps LibTorch's CPU allocator to count live and peak bytes. Installed only while estimate()
// runs; every CPU tensor allocation of a step goes through it. LibTorch's raw_allocate requires
// a DataPtr's context to be its data pointer, so the real allocations sit in a side table.
class CountingAllocator final : public c10::Allocator {
 public:
  // One per process, never destroyed: tensors allocated while counting (generator states,
  // caches) outlive estimate(), and their deleters must still find the table.
  static CountingAllocator& instance() {
    static auto* allocator = new CountingAllocator(c10::GetCPUAllocator());
    return *allocator;
  }
  c10::Allocator* base() const { return base_; }

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(std::size_t n) override { return count(n); }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    std::memcpy(dest, src, n);
  }
#else
  c10::DataPtr allocate(std::size_t n) const override { return count(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void reset_peak() { peak_.store(live_.load()); }
  std::uint64_t live() const { return live_.load(); }
  std::uint64_t peak() const { return peak_.load(); }

 private:
  struct Block {
    c10::DataPtr inner;
    std::size_t size;
  };
  c10::DataPtr count(std::size_t n) const {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    {
      std::lock_guard lock(mutex_);
      blocks_[data] = Block{std::move(inner), n};
    }
    const std::uint64_t now = live_.fetch_add(n) + n;
    std::uint64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(data, data, &release, c10::Device(c10::DeviceType::CPU));
  }
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  static void release(void* data) {
    CountingAllocator* self = &instance();
    Block block;
    {
      std::lock_guard lock(self->mutex_);
      auto it = self->blocks_.find(data);
      if (it == self->blocks_.end()) {
        // Allocated by the base allocator before we were installed (MKL-DNN frees its cached
        // buffers through whichever allocator is current): the base's raw deleter owns it.
        self->base_->raw_deleter()(data);
        return;
      }
      block = std::move(it->second);
      self->blocks_.erase(it);
    }
    self->live_.fetch_sub(block.size);
  }  // block.inner frees through the base allocator here

  c10::Allocator* base_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Block> blocks_;
  mutable std::atomic<std::uint64_t> live_{0};
  mutable std::atomic<std::uint64_t> peak_{0};
};

constexpr std::uint8_t kPriority = 100;  // above the default CPU allocator's registration

#if defined(VT_TORCH_CUDA)
int cuda_index(const std::string& device) {
  auto colon = device.find(':');
  return colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
}
std::uint64_t cuda_allocated(int device, bool peak) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  // The sum over the allocator's pools is the first entry (StatType::AGGREGATE = 0) in 1.13 and
  // every 2.x; the enum itself moved namespace twice (c10::CachingDeviceAllocator, then
  // c10::CachingAllocator), so it is not named here.
  const auto& s = stats.allocated_bytes.front();
  return static_cast<std::uint64_t>(peak ? s.peak : s.current);
}
#endif

// The process's resident set now (VmRSS), 0 where /proc is not there.
std::uint64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

PeakPrediction training_peak(const MemoryEstimate& e, std::vector<PeakPart> extra) {
  PeakPrediction p;
  p.parts = {{"process (LibTorch and veritrain code)", e.process_bytes},
             {"resting state (parameters, optimizer state, buffers)", e.resting_bytes},
             {"one step (activations, gradients, workspaces)", e.step_peak_bytes}};
  for (PeakPart& part : extra) p.parts.push_back(std::move(part));
  return p;
}

Result<MemoryEstimate> estimate(const Task& task, const TrainerOptions& options) {
  Task two_steps = task;
  two_steps.steps_per_epoch =
      2;  // a warm-up step (allocates lazily created state), then the measured one
  CountingAllocator& counting = CountingAllocator::instance();
  c10::Allocator* base = counting.base();
  c10::SetCPUAllocator(&counting, kPriority);
  struct Restore {
    c10::Allocator* base;
    ~Restore() { c10::SetCPUAllocator(base, kPriority); }
  } restore{base};

  MemoryEstimate e;
  e.process_bytes = resident_bytes();
  VT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(two_steps, options));
  e.parameters = trainer->parameter_count();
  e.device = trainer->device();
  e.gradient_groups = task.gradient_groups;
  e.examples_per_group = task.batch_size / task.gradient_groups;
  e.steps_per_epoch = steps_per_epoch(task, trainer->dataset_size());
  for (const TensorEntry& t : trainer->layout()) {
    if (t.name.rfind("param/", 0) == 0) e.parameter_bytes += t.nbytes();
    if (t.name.rfind("optim/", 0) == 0 || t.name.rfind("ema/", 0) == 0)
      e.optimizer_state_bytes += t.nbytes();
  }
  VT_ASSIGN_OR_RETURN(Bytes snapshot, trainer->snapshot());
  e.snapshot_bytes = snapshot.size();
  snapshot = Bytes();

  const bool cuda = e.device.rfind("cuda", 0) == 0;
  std::uint64_t resting = 0;
  auto step_start = std::chrono::steady_clock::now();
  EpochHooks hooks;
  hooks.progress_every = 1;
  hooks.on_progress = [&](const StepMetrics& m) {
    const auto now = std::chrono::steady_clock::now();
    if (m.step_in_epoch == 1) {
#if defined(VT_TORCH_CUDA)
      if (cuda) {
        c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(e.device));
        resting = cuda_allocated(cuda_index(e.device), false);
        e.resting_bytes = resting;
      }
#endif
      if (!cuda) {
        counting.reset_peak();
        resting = counting.live();
        e.resting_bytes = resting;
      }
      step_start = now;
      return;
    }
    e.step_seconds = std::chrono::duration<double>(now - step_start).count();
#if defined(VT_TORCH_CUDA)
    if (cuda) {
      e.step_peak_bytes = cuda_allocated(cuda_index(e.device), true) - resting;
      e.peak_source = "CUDA caching allocator peak during one step";
    }
#endif
    if (!cuda) {
      e.step_peak_bytes = counting.peak() - resting;
      e.peak_source = "LibTorch CPU allocator peak during one step (counted)";
    }
  };
  VT_RETURN_IF_ERROR(trainer->train_epoch(hooks));
  if (e.peak_source.empty())
    return internal_error("estimate: no allocator statistics for device " + e.device);
  // What the process holds besides its tensors once it has trained: the code the steps touched,
  // a TorchScript module's compiled graphs, data kept outside tensors. Freed heap that glibc
  // keeps for later (the step's activations) is handed back first, as a replay does.
  ::malloc_trim(0);
  const std::uint64_t resident = resident_bytes(), tensors = counting.live();
  if (resident > tensors) e.process_bytes = std::max(e.process_bytes, resident - tensors);
  return e;
}

}  // namespace vt::training
