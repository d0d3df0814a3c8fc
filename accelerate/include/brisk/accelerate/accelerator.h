// The Accelerator: Hugging Face Accelerate's training-loop helper in C++. It prepares a user's
// own model, optimizer, data loaders and schedulers in place for data-parallel training
// (docs/accelerator-options.md), and adds mixed precision, gradient
// accumulation, collectives for metrics, checkpoints and trackers.
//
//   Accelerator acc({.mixed_precision = MixedPrecision::BF16, .gradient_accumulation_steps = 2});
//   acc.prepare(net, opt, train_loader, sched);       // any order and number
//   for (auto& [x, y] : train_loader) {
//     auto sync = acc.accumulate(net);
//     Tensor loss;
//     { auto ac = acc.autocast(); loss = nn::cross_entropy(net(x), y); }
//     acc.backward(loss);
//     opt.step();                                    // does nothing on micro-steps that do not sync
//     sched.step();                                  // steps once per real optimizer step
//     opt.zero_grad();
//   }
//   acc.save_state();                                // <project_dir>/checkpoints/checkpoint_<n>
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "brisk/accelerate/env_vars.h"
#include "brisk/amp/autocast.h"
#include "brisk/amp/grad_scaler.h"
#include "brisk/core/tensor.h"
#include "brisk/data/dataloader.h"
#include "brisk/dist/process_group.h"
#include "brisk/nn/module.h"
#include "brisk/optim/lr_scheduler.h"
#include "brisk/optim/optimizer.h"
#include "brisk/util/fs.h"
#include "brisk/util/json.h"
#include "brisk/util/progress.h"

namespace brisk::dist {
class Reducer;
}
namespace brisk::accelerate::detail {
class SaveJob;  // a save_state's files being written (accelerate/src/checkpoint_save_job.h)
}

namespace brisk {

// Every field is optional: unset is not the same as the default. What the program sets wins, then
// the environment (BRISK_MIXED_PRECISION ..., filled by `brisk launch`), then the defaults shown.
struct AcceleratorOptions {
  std::optional<MixedPrecision> mixed_precision = std::nullopt;       // No | FP16 | BF16         (No)
  std::optional<int64_t> gradient_accumulation_steps = std::nullopt;  // >= 1                     (1)
  // Sharded data parallelism (docs/sharding.md): None | Zero1 (optimizer state) | Zero2 (and
  // gradients) | Zero3 (and parameters, gathered per unit around its forward and backward). (None)
  std::optional<Sharding> sharding = std::nullopt;
  // zero3's wrap policy: the names of the unit modules (as named_modules gives them, e.g. {"h0",
  // "h1"}), {"*"} for every module holding parameters itself. Empty: each direct child of the
  // model that holds parameters (nn::Embedding excepted: tied to heads), the rest one root unit. ({})
  std::vector<std::string> zero3_wrap = {};
  std::optional<bool> cpu = std::nullopt;                          // train on the CPU even with a GPU (false)
  std::optional<bool> device_placement = std::nullopt;             // move models to device()  (true)
  std::optional<bool> split_batches = std::nullopt;                // cut each global batch in N (false)
  std::optional<bool> even_batches = std::nullopt;                 // pad so ranks get equal batches (true)
  std::optional<uint64_t> seed = std::nullopt;                     // set_seed(seed) at construction (none)
  std::optional<std::string> project_dir = std::nullopt;           // checkpoints and logs     (".")
  std::optional<bool> automatic_checkpoint_naming = std::nullopt;  // save_state() -> checkpoints/checkpoint_<n> (false)
  std::optional<int64_t> total_limit = std::nullopt;               // keep at most this many automatic checkpoints (all)
  // save_state copies the state out and writes, hashes and publishes the files on a background
  // thread (docs/checkpoints.md, "Saving in the background"). (false: save_state returns once the
  // checkpoint is complete on disk)
  std::optional<bool> async_save = std::nullopt;
  std::optional<double> bucket_cap_mb = std::nullopt;         // Reducer buckets after the first (25)
  std::optional<bool> find_unused_parameters = std::nullopt;  // (false)
  // Every backward() checks the loss and the gradients for inf/NaN and throws, naming the first
  // parameter whose gradient is not finite (one host synchronisation per step on a GPU). (false)
  std::optional<bool> nan_watch = std::nullopt;
  // kernels::set_deterministic: deterministic kernels everywhere, or an error naming an op that has
  // none (torch.use_deterministic_algorithms). Unset: the process's setting is left as it is (on).
  std::optional<bool> deterministic = std::nullopt;
  // The per-op profiler (docs/profiling.md): true records every op, backward node, optimizer step and
  // batch fetch and prints the table to stderr at exit (BRISK_PROFILE=<file> writes it there
  // instead); false switches it off. Unset: BRISK_PROFILE decides (off).
  std::optional<bool> profile = std::nullopt;
  // GradScaler (fp16 only), PyTorch's defaults.
  std::optional<double> scaler_init_scale = std::nullopt;        // 65536
  std::optional<double> scaler_growth_factor = std::nullopt;     // 2
  std::optional<double> scaler_backoff_factor = std::nullopt;    // 0.5
  std::optional<int64_t> scaler_growth_interval = std::nullopt;  // 2000
};

// The options in force, each decided by the program, the environment or the default.
struct AcceleratorSettings {
  MixedPrecision mixed_precision = MixedPrecision::No;
  int64_t gradient_accumulation_steps = 1;
  Sharding sharding = Sharding::None;
  std::vector<std::string> zero3_wrap;
  bool cpu = false;
  bool device_placement = true;
  bool split_batches = false;
  bool even_batches = true;
  std::optional<uint64_t> seed;
  std::string project_dir = ".";
  bool automatic_checkpoint_naming = false;
  std::optional<int64_t> total_limit;
  bool async_save = false;
  double bucket_cap_mb = 25.0;
  bool find_unused_parameters = false;
  bool nan_watch = false;
  std::optional<bool> deterministic;  // applied by the Accelerator when set
  std::optional<bool> profile;        // applied by the Accelerator when set
  amp::GradScalerOptions scaler;
  // Where each value came from: "program", "env BRISK_..." or "default" (by field name).
  std::map<std::string, std::string> source;
};

// Resolves options over the environment (`getenv` is injectable for tests) and validates them;
// bad values throw brisk::Error naming the option, its source and the value.
AcceleratorSettings resolve_accelerator_options(const AcceleratorOptions& o,
                                                const std::function<const char*(const char*)>& getenv = nullptr);

namespace accelerate {

// One rank's share of an epoch's batch plan (docs/accelerator-options.md "Data sharding"; Accelerate's
// BatchSamplerShard). `global` is the loader's own plan (batch_size samples each, the last
// possibly short unless drop_last). Without split_batches rank r takes batches r, r+N, ...;
// with even_batches (and no drop_last) the shortfall is filled by cycling samples from the
// start so every rank gets the same number of full batches; with drop_last incomplete rounds
// are dropped. With split_batches each global batch is cut into N slices of batch_size / N.
struct ShardedPlan {
  data::BatchPlan batches;
  // Samples in the last round (the last batch of every rank together) that are real, and the
  // round's size: gather_for_metrics keeps the first `last_round_real` of the last gathered batch.
  int64_t last_round_real = 0;
  int64_t last_round_size = 0;
};
ShardedPlan shard_batch_plan(const data::BatchPlan& global, int64_t batch_size, int64_t num_processes, int64_t rank,
                             bool split_batches, bool even_batches, bool drop_last);

// The device a process trains on: the CPU with `cpu` or where no GPU is visible, else the GPU of
// its local rank (each process on a host gets its own). Throws, saying how to fix the launch, when
// the host has fewer visible GPUs than processes.
Device select_device(bool cpu, int gpu_count, int local_rank, int local_world_size);

// SHA-256 of bytes / of a file, as lowercase hex (the checkpoint manifest's checksums).
std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::string& path);

// "10GB" (10^9 bytes), "500MB", "2GiB" (2^30), "100KB", or a plain byte count; throws on anything else.
int64_t parse_size(const std::string& text);

// Whether `dir` holds a complete checkpoint: a manifest whose own checksum is right and whose
// files all exist with the listed sizes and SHA-256. On false, *why says what is wrong.
bool is_complete_checkpoint(const std::string& dir, std::string* why = nullptr);

// BRISK_RESTART_COUNT: 0 on a job's first attempt (and outside `brisk launch --max-restarts`), k
// when the launcher started the job again for the k-th time. Throws when it is not a number.
int restart_count();

// `brisk merge-weights`: the weights of prepared model `model` (0: the first) of the checkpoint in
// `dir` (saved by any number of processes, sharded or not) as one safetensors file, byte for byte
// what save_model writes for that model (tied weights once, {"format": "pt"}). Every file the
// manifest lists is checked first (size and SHA-256); throws brisk::Error naming what is wrong.
std::string merged_model_weights(const std::string& dir, size_t model = 0);

}  // namespace accelerate

class Accelerator {
 public:
  explicit Accelerator(const AcceleratorOptions& options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  const AcceleratorSettings& settings() const { return s_; }
  MixedPrecision mixed_precision() const { return s_.mixed_precision; }
  int64_t gradient_accumulation_steps() const { return s_.gradient_accumulation_steps; }
  Sharding sharding() const { return s_.sharding; }

  // --- process facts -------------------------------------------------------------------------
  bool is_main_process() const { return rank_ == 0; }
  bool is_local_main_process() const { return local_rank_ == 0; }
  int process_index() const { return rank_; }
  int local_process_index() const { return local_rank_; }
  int num_processes() const { return world_size_; }
  bool distributed() const { return world_size_ > 1; }
  // The CPU, or with a GPU present (and not `cpu`) this process's GPU (cuda:<local rank>), which
  // the constructor makes the current device. prepare() moves models there and has the prepared
  // data loaders hand out batches there.
  Device device() const { return device_; }
  dist::ProcessGroup& process_group() const { return *pg_; }

  void wait_for_everyone();
  // While held, the main process (first) or the local main process runs before the others.
  class MainProcessFirst {
   public:
    MainProcessFirst(Accelerator& acc, bool local);
    ~MainProcessFirst();
    MainProcessFirst(const MainProcessFirst&) = delete;
    MainProcessFirst& operator=(const MainProcessFirst&) = delete;

   private:
    Accelerator& acc_;
    bool is_first_;
  };
  [[nodiscard]] MainProcessFirst main_process_first() { return MainProcessFirst(*this, false); }
  [[nodiscard]] MainProcessFirst local_main_process_first() { return MainProcessFirst(*this, true); }
  // Prints the arguments (streamed, then a newline) on the local main process only.
  template <class... A>
  void print(const A&... a) const {
    if (!is_local_main_process()) return;
    std::ostringstream os;
    (os << ... << a);
    std::cout << os.str() << std::endl;
  }

  // Seeds brisk's default generator (the same seed on every rank) and the shuffling of every
  // prepared data loader.
  void set_seed(uint64_t seed);

  // --- prepare ---------------------------------------------------------------------------------
  // Wraps models, optimizers, data loaders and schedulers in place, in any order and number.
  template <class... T>
  void prepare(T&... objects) {
    (prepare_one(objects), ...);
  }
  // Moves the model to device() (with device_placement) and, with several processes, wraps it.
  void prepare_one(nn::Module& model);
  // Gates step/zero_grad: after prepare, the user's own `opt.step()` and `opt.zero_grad()` do
  // nothing on a micro-step that does not synchronise (inside accumulate() before the last
  // micro-step of the window), and step() also does nothing when the loss scaler found inf/NaN
  // gradients (sync_gradients(), optimizer_step_was_skipped() tell which). Schedulers prepared
  // here follow the same gate. State the optimizer already has moves to its parameters' devices.
  void prepare_one(optim::Optimizer& optimizer);
  // Shards the loader's batches across processes; on a GPU (with device_placement) the loader
  // hands out batches on device(), copied ahead of use (see DataLoaderOptions::device).
  void prepare_one(data::DataLoader& loader);
  void prepare_one(optim::LRScheduler& scheduler);
  // The user's model itself (prepare wraps in place; for symmetry with Accelerate).
  template <class M>
  M& unwrap_model(M& model) const {
    return model;
  }
  // Forgets every prepared object (their gates and reducers are removed) and empties caches.
  void free_memory();

  // --- the training step -----------------------------------------------------------------------
  // loss / gradient_accumulation_steps (× the loss scale under fp16), then backward; gradients
  // are averaged across processes when this step syncs.
  void backward(const Tensor& loss);
  // Gradient accumulation: constructing the guard decides whether this micro-step syncs
  // (every gradient_accumulation_steps-th step, and the last batch of the data loader).
  class Accumulate {
   public:
    Accumulate(Accelerator& acc, nn::Module* model);
    // User-provided, not `= default`: then `auto sync = acc.accumulate(net);` is not an unused variable.
    ~Accumulate() {}  // NOLINT(modernize-use-equals-default)
    Accumulate(const Accumulate&) = delete;
    Accumulate& operator=(const Accumulate&) = delete;
    bool sync() const { return sync_; }

   private:
    bool sync_;
  };
  [[nodiscard]] Accumulate accumulate(nn::Module& model) { return Accumulate(*this, &model); }
  [[nodiscard]] Accumulate accumulate() { return Accumulate(*this, nullptr); }
  // Whether gradients are synchronised (and the optimizer steps) in the current micro-step.
  bool sync_gradients() const { return sh_->sync_gradients; }
  // Inside the guard the model's backward passes accumulate locally without communication.
  class NoSync {
   public:
    NoSync(Accelerator& acc, nn::Module& model);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Accelerator& acc_;
    nn::Module* model_;
  };
  [[nodiscard]] NoSync no_sync(nn::Module& model) { return NoSync(*this, model); }
  // Mixed precision for the forward pass and the loss (nothing under "no").
  class Autocast {
   public:
    explicit Autocast(MixedPrecision mixed_precision);
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

   private:
    std::optional<amp::Autocast> guard_;
  };
  [[nodiscard]] Autocast autocast() const { return Autocast(s_.mixed_precision); }
  // Gradient clipping over the (synchronised) gradients; under fp16 they are unscaled first.
  // Returns the total norm before clipping.
  double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
  double clip_grad_norm_(const nn::Module& model, double max_norm, double norm_type = 2.0);
  // The same, returning the norm as a 0-d f64 tensor without reading it: on one GPU without
  // sharding or fp16 loss scaling, nothing waits for the GPU, so a CUDA graph can capture it.
  Tensor clip_grad_norm_tensor_(const nn::Module& model, double max_norm, double norm_type = 2.0);
  void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);
  void clip_grad_value_(const nn::Module& model, double clip_value);
  // Under fp16: divides the optimizer's gradients by the loss scale now (done once per step).
  void unscale_gradients();
  // True when the last real optimizer step was skipped because the fp16 scaler found inf/NaN.
  bool optimizer_step_was_skipped() const { return sh_->step_skipped; }
  // The GradScaler (fp16), or nullptr.
  amp::GradScaler* scaler() const { return scaler_.get(); }
  // Micro-steps seen by accumulate() since the start (or the last end of a data loader).
  int64_t step() const { return step_; }

  // --- collectives ------------------------------------------------------------------------------
  // Every rank's tensor stacked along dim 0 in rank order: (world * n, ...); shapes must match.
  // A 0-d tensor gathers to (world).
  Tensor gather(const Tensor& t);
  // Like gather (ranks' first dims may differ), but on the last batch of an epoch drops the
  // samples that were duplicated to even out the shards: an epoch yields exactly len(dataset).
  Tensor gather_for_metrics(const Tensor& t);
  // Sum (default), Mean, Max, Min or Product over ranks; returns a new tensor on every rank.
  Tensor reduce(const Tensor& t, dist::ReduceOp op = dist::ReduceOp::Sum);
  // Rank `from`'s values, on every rank (shapes and dtypes must match).
  Tensor broadcast(const Tensor& t, int from = 0);
  // Pads every rank's tensor with `value` to the largest size along `dim` (at the end, or at
  // the start with pad_first).
  Tensor pad_across_processes(const Tensor& t, int64_t dim = 0, double value = 0.0, bool pad_first = false);
  // This rank's contiguous share of `items`: the first len % N ranks get one more.
  template <class T>
  std::vector<T> split_between_processes(const std::vector<T>& items) const {
    auto [begin, end] = share(static_cast<int64_t>(items.size()));
    return std::vector<T>(items.begin() + begin, items.begin() + end);
  }
  Tensor split_between_processes(const Tensor& t) const;
  // [begin, end) of this rank's share of n items.
  std::pair<int64_t, int64_t> share(int64_t n) const;

  // --- checkpoints -----------------------------------------------------------------------------
  // Writes models, optimizers, schedulers, the scaler, every rank's RNG state, the data
  // loaders' epoch and position and the step counters into `dir` (docs/checkpoints.md).
  // Atomic: a crash never leaves a checkpoint that loads. No argument: with
  // automatic_checkpoint_naming <project_dir>/checkpoints/checkpoint_<n>. Returns the folder.
  // Under zero3 nothing is gathered: each rank writes its own shard of the parameters.
  // With async_save it returns once the state is copied out; the files are written, hashed and
  // published on a background thread, and the next save_state, load_state, newest_checkpoint,
  // wait_for_everyone, wait_for_save and the destructor wait for them (docs/checkpoints.md).
  std::string save_state(const std::string& dir = "");
  // Waits until the last save_state's checkpoint is complete and published (at once without
  // async_save); a failure of its background write is thrown here, naming the file, on every rank.
  // Collective: every rank calls it.
  void wait_for_save();
  // Restores everything save_state wrote; no argument: the newest complete checkpoint under
  // <project_dir>/checkpoints. The next iteration of each data loader continues where the
  // saved run stopped. Returns the folder loaded.
  std::string load_state(const std::string& dir = "");
  // The newest complete checkpoint under <project_dir>/checkpoints, as the main process sees it
  // (every rank gets its answer; every rank must call it); "" when there is none. A folder whose
  // manifest is missing or wrong (a save cut short by a crash) is passed over, the main process
  // printing why.
  std::string newest_checkpoint();
  // What a program restarted by `brisk launch --max-restarts` does to continue by itself: on a
  // restart (BRISK_RESTART_COUNT above 0), or when `resume` is true, load_state() from the newest
  // complete checkpoint and return its folder. "" without a restart and without `resume`, or on a
  // restart that came before the first checkpoint (the run starts from scratch, as printed);
  // `resume` with no checkpoint at all throws (docs/fault-tolerance.md).
  // Also after a preemption: when the last run of this project stopped in stop_if_preempted (its
  // marker <project_dir>/checkpoints/PREEMPTED is there), the newest complete checkpoint is loaded
  // on a first attempt too; the marker goes when the run that continued ends normally.
  std::string resume_on_restart(bool resume = false);

  // --- preemption (docs/fault-tolerance.md, "Preemption") --------------------------------------
  // Call at a step boundary (after the optimizer step and the program's own counters): whether the
  // job was told to stop, i.e. SIGTERM or SIGUSR1 reached any rank since the first call (which
  // installs the handlers: before it, and in a program that never calls it, those signals end the
  // process as usual). Collective: every rank calls it after the same step and gets the same
  // answer (one all-reduce of two numbers; none on one process, nor on a micro-step that does not
  // sync: an accumulation window finishes its optimizer step first).
  bool should_stop();
  // The one line a training loop needs: should_stop(), and when true every rank saves a checkpoint
  // (save_state() with automatic naming, which it requires; no second one when this step's was
  // just saved), the main process prints where and leaves the PREEMPTED marker, and the program
  // exits with status kPreemptedStatus (75) after leaving the job cleanly.
  void stop_if_preempted();
  // Extra state saved and restored with the checkpoint under `name` (a step counter, a best
  // score ...): `save` is called by save_state, `load` by load_state.
  void register_for_checkpointing(const std::string& name, std::function<json::Value()> save,
                                  std::function<void(const json::Value&)> load);
  // The next iteration of `loader` starts at batch n (for resuming by hand).
  data::DataLoader& skip_first_batches(data::DataLoader& loader, int64_t n);
  // The model's weights as safetensors (main process): one model.safetensors, or shards of at
  // most max_shard_size plus model.safetensors.index.json (Hugging Face's layout); tied weights
  // are written once. Under zero3 every rank must call it (the parameters are gathered first).
  void save_model(const nn::Module& model, const std::string& dir, const std::string& max_shard_size = "10GB");
  // zero3 (docs/sharding.md): between uses every rank holds only its shard of the parameters,
  // whose tensors have no bytes. Inside this guard's lifetime the model's full parameters are
  // gathered on every rank (to read, evaluate or change by hand: changes are written back into
  // the shards when it ends). Collective: every rank makes it. A no-op for the other stages.
  class [[nodiscard]] FullParameters {
   public:
    explicit FullParameters(std::function<void()> done) : done_(std::move(done)) {}
    FullParameters(FullParameters&& o) noexcept : done_(std::exchange(o.done_, nullptr)) {}
    FullParameters(const FullParameters&) = delete;
    FullParameters& operator=(const FullParameters&) = delete;
    FullParameters& operator=(FullParameters&&) = delete;
    ~FullParameters() {
      if (done_) done_();
    }

   private:
    std::function<void()> done_;
  };
  FullParameters full_parameters(const nn::Module& model);
  // Main process only: a safetensors file of `state` (accelerator.save(model.state_dict(), path)).
  void save(const nn::NamedTensors& state, const std::string& path);

  // --- trackers ----------------------------------------------------------------------------------
  // Main process: appends {"step": step, ...values} to <project_dir>/metrics.jsonl and a row to
  // <project_dir>/metrics.csv (a column per key seen so far), each fsynced; only a call that brings
  // a new key rewrites metrics.csv (atomically, with the wider header).
  void log(const json::Value::Object& values, std::optional<int64_t> step = std::nullopt);
  // A progress bar only the main process draws (the others' bars count silently).
  [[nodiscard]] ProgressBar progress_bar(int64_t total, const std::string& description,
                                         const std::string& unit = "it") const {
    return ProgressBar(total, description, unit, is_main_process());
  }

 private:
  struct LoaderState;
  struct ModelState;
  struct OptimizerState;
  void on_synced_backward();
  void check_finite(const Tensor& loss);
  void check_sharded_params();
  LoaderState* active_loader();
  std::string checkpoint_root() const;
  void finish_save();        // wait_for_save (checkpoint_write.cpp)
  void inject_fault();       // BRISK_FAULT_KILL_AT_STEP (restart.cpp)
  void inject_preemption();  // BRISK_FAULT_SIGNAL_AT_STEP (preemption.cpp)
  void note_automatic_save(const std::string& dir);
  bool preempted_before();   // the PREEMPTED marker is there (the main process decides)
  void forget_preemption();  // at the end of a run that continued after a preemption
  struct LoadedCheckpoint;
  class CheckpointReader;  // load_state's reading and checking (accelerate/src/checkpoint_read.cpp)
  class CheckpointWriter;  // save_state's steps (accelerate/src/checkpoint_write.cpp)
  void check_not_prepared(const void* object, const char* what);
  static void move_state_to_params(optim::Optimizer& optimizer);

  AcceleratorSettings s_;
  dist::ProcessGroup* pg_ = nullptr;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0;
  Device device_ = kCPU;
  std::unique_ptr<amp::GradScaler> scaler_;

  std::vector<std::unique_ptr<ModelState>> models_;
  std::vector<std::shared_ptr<OptimizerState>> optimizers_;
  std::vector<std::shared_ptr<LoaderState>> loaders_;
  std::vector<optim::LRScheduler*> schedulers_;
  struct CustomState {
    std::string name;
    std::function<json::Value()> save;
    std::function<void(const json::Value&)> load;
  };
  std::vector<CustomState> custom_;

  // What the gates and batch sources installed in the user's objects read: shared, so that an
  // object that outlives the Accelerator keeps working (its gates then let everything through).
  struct Shared {
    bool alive = true;
    bool sync_gradients = true;
    bool step_skipped = false;
    uint64_t loader_tick = 0;      // counts epoch starts over all loaders
    std::optional<uint64_t> seed;  // the loaders' shuffling seed (set_seed)
  };
  std::shared_ptr<Shared> sh_ = std::make_shared<Shared>();
  bool unscaled_ = false;
  int64_t step_ = 0;
  int64_t backward_calls_ = 0;                 // counted by nan_watch, for its messages
  int64_t fault_backwards_ = 0;                // counted for BRISK_FAULT_KILL_AT_STEP
  int64_t signal_backwards_ = 0;               // counted for BRISK_FAULT_SIGNAL_AT_STEP
  int64_t optimizer_steps_ = 0;                // synced backwards in this process
  int64_t saved_at_step_ = -1;                 // optimizer_steps_ at the last automatic save_state()
  std::string last_auto_save_;                 // its folder
  int preempt_signal_ = 0, preempt_rank_ = 0;  // what should_stop() learned
  bool preempted_ = false;                     // stop_if_preempted is ending the program
  bool continues_preempted_ = false;           // resume_on_restart continued after a preemption
  LoaderState* active_ = nullptr;
  bool resumed_ = false;
  std::unique_ptr<accelerate::detail::SaveJob> pending_save_;  // the save in flight (async_save)
  std::vector<json::Value> log_rows_;
  bool log_started_ = false;
  io::AppendFile log_jsonl_, log_csv_;    // open once logging starts; each log() appends a line
  std::vector<std::string> log_columns_;  // metrics.csv's header
};

}  // namespace brisk
