// save_state (docs/checkpoints.md): every rank copies what differs between ranks out of the
// training state into files of its own, the main process the shared state; a SaveJob
// (checkpoint_save_job.cpp) writes them, fsynced, into a temporary folder, in the background with
// async_save; the manifest, written last, lists every file with its size and SHA-256; then the
// finished folder is swapped in atomically, and with automatic naming the oldest checkpoints beyond
// total_limit go. At the next wait (finish_save) every rank learns whether any failed, so a failed
// save leaves nothing behind but the checkpoints that were there before. Also save_model (sharded
// safetensors and Hugging Face's index) and save.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "accelerator_impl.h"
#include "brisk/core/rng.h"
#include "brisk/data/safetensors.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/fs.h"
#include "brisk/util/trace.h"
#include "checkpoint_format.h"
#include "checkpoint_save_job.h"
#include "checkpoint_shards.h"

namespace brisk {

namespace fs = std::filesystem;
using namespace accelerate::detail;  // the checkpoint's format and shards (checkpoint_*.h)

namespace {

// A temp file beside it, fsync, rename, fsync the folder (a reader sees the old file or the whole new one).
void write_atomic(const fs::path& path, const std::string& bytes) {
  io::write_file_atomic(path.string(), bytes, "Accelerator::save_state");
}

json::Value scalars_json(const std::map<std::string, double>& m) {
  json::Value o = json::Value::object();
  for (const auto& [k, v] : m) o.set(k, v);
  return o;
}

}  // namespace

void Accelerator::register_for_checkpointing(const std::string& name, std::function<json::Value()> save,
                                             std::function<void(const json::Value&)> load) {
  BRISK_CHECK(save && load, "Accelerator::register_for_checkpointing: '", name, "' needs both save and load");
  for (const CustomState& c : custom_)
    BRISK_CHECK(c.name != name, "Accelerator::register_for_checkpointing: '", name, "' is already registered");
  custom_.push_back({name, std::move(save), std::move(load)});
}

std::string Accelerator::checkpoint_root() const {
  return (fs::path(s_.project_dir) / "checkpoints").string();
}

// save_state's steps, in the order they run. Each on_every_rank step ends with every rank knowing
// whether any rank failed.
class Accelerator::CheckpointWriter {
 public:
  CheckpointWriter(Accelerator& acc, std::string dir) : a_(acc), dir_(std::move(dir)) {}

  // Copies the state out (every rank its own files, the main process the shared ones) and says
  // where they go: what the SaveJob needs to write them, with no further look at the training state.
  SavePlan snapshot() {
    shard_parameters();
    choose_folder();
    start_temporary_folder();
    on_every_rank(a_.pg_, a_.world_size_, kOp, [&] {
      copy_rank_files();
      if (a_.is_main_process()) copy_state();
    });
    SavePlan plan{.final_dir = final_dir_,
                  .parent = parent_,
                  .tmp = tmp_,
                  .files = std::move(files_),
                  .rank = a_.rank_,
                  .world_size = a_.world_size_,
                  .root = dir_.empty() ? fs::path(a_.checkpoint_root()) : fs::path(),
                  .total_limit = dir_.empty() ? a_.s_.total_limit : std::nullopt};
    return plan;
  }

 private:
  static constexpr const char* kOp = "Accelerator::save_state";

  // zero3: nothing is gathered. Each rank writes its own shard of the parameters (edits made by
  // hand inside a full_parameters guard are written back into the shards first).
  void shard_parameters() {
    sharded_.resize(a_.models_.size());
    has_shards_.assign(a_.models_.size(), false);
    for (size_t i = 0; i < a_.models_.size(); ++i) {
      const auto engines = param_engines(a_.optimizers_, *a_.models_[i]->model);
      if (engines.empty()) continue;
      for (const ZeroEngine* e : engines) e->scatter_gathered();
      sharded_[i] = param_shards(*a_.models_[i]->model, engines, a_.world_size_);
      has_shards_[i] = true;
    }
  }

  // The folder to publish (the one given, or the next checkpoint_<n> with automatic naming) and
  // the temporary folder beside it that the files go to first.
  void choose_folder() {
    if (dir_.empty()) {
      BRISK_CHECK(a_.s_.automatic_checkpoint_naming,
                  "Accelerator::save_state: no folder given; pass one, or set automatic_checkpoint_naming "
                  "(checkpoints then go to <project_dir>/checkpoints/checkpoint_<n>)");
      // The main process picks the number (one more than the highest there) and tells the others.
      const fs::path root = a_.checkpoint_root();
      Tensor n = zeros({1}, {.dtype = DType::I64});
      on_every_rank(a_.pg_, a_.world_size_, kOp, [&] {
        if (!a_.is_main_process()) return;
        fs::create_directories(root);
        auto existing = numbered_checkpoints(root);
        n.data<int64_t>()[0] = existing.empty() ? 0 : existing.back().first + 1;
      });
      if (a_.world_size_ > 1) a_.pg_->broadcast(n, {.root = 0});
      final_dir_ = root / ("checkpoint_" + std::to_string(n.item<int64_t>()));
    } else {
      final_dir_ = dir_;
    }
    final_dir_ = final_dir_.lexically_normal();
    if (final_dir_.filename().empty()) final_dir_ = final_dir_.parent_path();
    parent_ = final_dir_.parent_path().empty() ? fs::path(".") : final_dir_.parent_path();
    std::string tmp_name = ".";  // (not "." + name: GCC 12 warns falsely about that at -O3)
    tmp_name += final_dir_.filename().string();
    tmp_name += ".partial";
    tmp_ = parent_ / tmp_name;
  }

  void start_temporary_folder() {
    on_every_rank(a_.pg_, a_.world_size_, kOp, [&] {
      if (!a_.is_main_process()) return;
      fs::create_directories(parent_);
      fs::remove_all(tmp_);  // a save that died earlier
      fs::create_directories(tmp_);
    });
  }

  // A file of the checkpoint: its bytes now (the SaveJob writes them and takes their checksum).
  void put(const std::string& name, std::string bytes) {
    files_.push_back({.name = name, .bytes = std::move(bytes), .tensors = {}, .metadata = {}, .is_safetensors = false});
  }

  // A safetensors file of the checkpoint. Synchronous: its bytes now. async_save: a copy of each
  // tensor in host memory (the CPU allocator's cached blocks after the first save, so no page
  // faults), made into the file's bytes on the background thread; the bytes are the same.
  void put_tensors(const std::string& name, const nn::NamedTensors& tensors,
                   const std::map<std::string, std::string>& metadata = {}) {
    if (!a_.s_.async_save) {
      put(name, data::safetensors_bytes(tensors, metadata));
      return;
    }
    nn::NamedTensors copies;
    copies.reserve(tensors.size());
    for (const auto& [n, t] : tensors) {
      Tensor c = empty(t.sizes(), {.dtype = t.dtype()});
      kernels::copy_(c, t.detach());
      copies.emplace_back(n, std::move(c));
    }
    files_.push_back(
        {.name = name, .bytes = {}, .tensors = std::move(copies), .metadata = metadata, .is_safetensors = true});
  }

  // Every rank: what differs between ranks, in files of its own. Its random state; its data
  // loaders' epoch and position; and, saved in the middle of a gradient accumulation, the
  // gradients its micro-steps accumulated so far (not synchronised yet, so different on every
  // rank: without them the resumed run would step with part of its gradient). Under zero3 its
  // parameter shards, under a sharded optimizer its shard of the state.
  void copy_rank_files() {
    const int rank = a_.rank_;
    const Generator::State g = default_generator().state();
    json::Value r = json::Value::object();
    r.set("rank", rank);
    json::Value gen = json::Value::object();
    gen.set("seed", static_cast<uint64_t>(g.seed));
    gen.set("offset", static_cast<uint64_t>(g.offset));
    r.set("default_generator", gen);
    r.set("data_loaders", loaders_json());
    json::Value grad_files = json::Value::array();
    for (size_t i = 0; i < a_.models_.size(); ++i) {
      nn::NamedTensors grads;
      for (auto& [name, p] : a_.models_[i]->model->named_parameters())
        if (p.grad().defined()) grads.emplace_back(name, p.grad());
      if (grads.empty()) {
        grad_files.push_back(json::Value());
        continue;
      }
      put_tensors(gradients_file(i, rank), grads);
      grad_files.push_back(gradients_file(i, rank));
    }
    r.set("gradients", grad_files);
    for (size_t i = 0; i < a_.models_.size(); ++i) {
      if (!has_shards_[i]) continue;
      nn::NamedTensors blocks;
      for (size_t k = 0; k < sharded_[i].blocks.size(); ++k)
        blocks.emplace_back("bucket." + std::to_string(k), sharded_[i].blocks[k]);
      put_tensors(param_shard_file(i, rank), blocks,
                  {{"format", kParamShardFormat},
                   {"rank", std::to_string(rank)},
                   {"num_processes", std::to_string(a_.world_size_)},
                   {"layout", sharded_[i].layout.dump()}});
    }
    for (size_t i = 0; i < a_.optimizers_.size(); ++i)
      if (a_.optimizers_[i]->zero)
        put_tensors(optimizer_shard_file(i, rank), a_.optimizers_[i]->opt->state_dict().tensors);
    put(rank_file(rank), r.dump(2) + "\n");
  }

  // Each data loader's epoch and position: the batch the program takes next, whatever its loop
  // did (in the middle of an epoch, that epoch at the next batch; after the loop ended or broke
  // out early, the next loop's epoch from its start), so a resumed run does what this one does
  // next. The global batch (examples per step over all processes) goes with them: a resume on
  // another number of processes keeps the loader's position only when it is unchanged.
  json::Value loaders_json() const {
    json::Value loaders = json::Value::array();
    for (auto& l : a_.loaders_) {
      const data::DataLoader::NextBatch next = l->loader->next_batch();
      json::Value o = json::Value::object();
      o.set("epoch", static_cast<uint64_t>(next.epoch));
      o.set("position", next.batch);
      o.set("in_loop", next.in_iteration);
      o.set("iterable", l->iterable);
      o.set("global_batch", l->global_batch(a_.s_.split_batches, a_.world_size_));
      loaders.push_back(o);
    }
    return loaders;
  }

  // The main process: state.json, with the model and optimizer files it names.
  void copy_state() {
    json::Value st = json::Value::object();
    st.set("format", kFormat);
    st.set("version", kVersion);
    st.set("num_processes", a_.world_size_);
    st.set("step", a_.step_);
    const AcceleratorSettings& s = a_.s_;
    json::Value cfg = json::Value::object();
    cfg.set("mixed_precision", std::string(enum_name(s.mixed_precision)));
    cfg.set("sharding", std::string(enum_name(s.sharding)));
    cfg.set("gradient_accumulation_steps", s.gradient_accumulation_steps);
    cfg.set("split_batches", s.split_batches);
    cfg.set("even_batches", s.even_batches);
    cfg.set("seed", s.seed ? json::Value(static_cast<uint64_t>(*s.seed)) : json::Value());
    st.set("config", cfg);
    st.set("models", copy_models());
    st.set("optimizers", copy_optimizers());
    json::Value scheds = json::Value::array();
    for (optim::LRScheduler* sched : a_.schedulers_) {
      json::Value o = json::Value::object();
      o.set("scalars", scalars_json(sched->state_dict().scalars));
      scheds.push_back(o);
    }
    st.set("schedulers", scheds);
    st.set("scaler", a_.scaler_ ? scalars_json(a_.scaler_->state_dict().scalars) : json::Value());
    json::Value custom = json::Value::object();
    for (const CustomState& c : a_.custom_) custom.set(c.name, c.save());
    st.set("custom", custom);
    put(kState, st.dump(2) + "\n");
  }

  // Each model's file (under zero3 what its parameter shards do not hold) and state.json's entries.
  json::Value copy_models() {
    json::Value models = json::Value::array();
    for (size_t i = 0; i < a_.models_.size(); ++i) {
      nn::NamedTensors sd;
      for (auto& [name, t] : nn::remove_tied_duplicates(a_.models_[i]->model->state_dict()))
        if (!sharded_[i].names.count(name)) sd.emplace_back(name, t);
      put_tensors(model_file(i), sd, {{"format", "pt"}});
      json::Value m = json::Value::object();
      m.set("file", model_file(i));
      if (has_shards_[i]) {
        // zero3: the rest of the state dict above; the parameters in every rank's shard file.
        json::Value shards = json::Value::array();
        for (int r = 0; r < a_.world_size_; ++r) shards.push_back(param_shard_file(i, r));
        m.set("shards", shards);
        m.set("layout", sharded_[i].layout);
      }
      models.push_back(m);
    }
    return models;
  }

  // Each unsharded optimizer's state file and state.json's entries (a sharded one's shards are
  // written by every rank).
  json::Value copy_optimizers() {
    json::Value opts = json::Value::array();
    for (size_t i = 0; i < a_.optimizers_.size(); ++i) {
      const OptimizerState& os = *a_.optimizers_[i];
      optim::StateDict sd = os.opt->state_dict();
      json::Value o = json::Value::object();
      if (os.zero) {
        // Every rank wrote its shard; rank r reads shards[r] back.
        json::Value shards = json::Value::array();
        for (int r = 0; r < a_.world_size_; ++r) shards.push_back(optimizer_shard_file(i, r));
        o.set("file", optimizer_shard_file(i, 0));
        o.set("shards", shards);
        o.set("layout", layout_json(os.zero->layout()));
      } else {
        put_tensors(optimizer_file(i), sd.tensors);
        o.set("file", optimizer_file(i));
      }
      o.set("name", os.opt->name());
      o.set("scalars", scalars_json(sd.scalars));
      opts.push_back(o);
    }
    return opts;
  }

  Accelerator& a_;
  const std::string dir_;  // as given ("" for automatic naming)
  fs::path final_dir_, parent_, tmp_;
  std::vector<ParamShards> sharded_;  // zero3, per model
  std::vector<bool> has_shards_;
  std::vector<SaveFile> files_;  // this rank's files, copied out
};

std::string Accelerator::save_state(const std::string& dir) {
  finish_save();  // the previous save: its folder must be in place before the next is numbered
  auto span = trace_span("save_state", "checkpoint");
  SavePlan plan = CheckpointWriter(*this, dir).snapshot();
  std::string out = plan.final_dir.string();
  pending_save_ = std::make_unique<SaveJob>(std::move(plan), s_.async_save);
  if (!s_.async_save) finish_save();
  if (dir.empty()) note_automatic_save(out);  // what a preemption right after it saves (preemption.cpp)
  return out;
}

// Waits for the save in flight; every rank learns whether any rank's part failed, and a failure is
// an error on every rank (the failing one names the file) that leaves the previous checkpoints as
// they were. Collectives only here, on the calling thread: the SaveJob never runs one.
void Accelerator::finish_save() {
  if (!pending_save_) return;
  std::unique_ptr<SaveJob> job = std::move(pending_save_);
  auto span = trace_span("wait for checkpoint", "checkpoint");
  constexpr const char* kOp = "Accelerator::save_state";
  on_every_rank(
      pg_, world_size_, kOp, [&] { job->wait_own_files(); },
      [&] {
        job->cancel();  // the main process stops waiting for the files of a rank that failed
        try {
          job->wait_all();
        } catch (...) {  // reported by on_every_rank
        }
      });
  on_every_rank(pg_, world_size_, kOp, [&] { job->wait_all(); });
}

void Accelerator::wait_for_save() {
  finish_save();
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir, const std::string& max_shard_size) {
  const int64_t limit = accelerate::parse_size(max_shard_size);
  FullParameters gathered = full_parameters(model);  // zero3: gathered on every rank (call it on every rank)
  if (!is_main_process()) return;
  const fs::path out = dir;
  fs::create_directories(out);
  nn::NamedTensors state = nn::remove_tied_duplicates(model.state_dict());
  std::vector<nn::NamedTensors> shards(1);
  int64_t bytes = 0, total = 0;
  for (auto& [name, t] : state) {
    const auto n = static_cast<int64_t>(t.nbytes());
    if (!shards.back().empty() && bytes + n > limit) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().emplace_back(name, t);
    bytes += n;
    total += n;
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (shards.size() == 1) {
    data::save_safetensors((out / "model.safetensors").string(), shards.front(), meta);
    return;
  }
  // Hugging Face's layout: model-00001-of-00003.safetensors ... and an index naming each tensor's file.
  json::Value weight_map = json::Value::object();
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    data::save_safetensors((out / name).string(), shards[i], meta);
    for (auto& [tname, t] : shards[i]) entries.emplace_back(tname, name);
  }
  std::sort(entries.begin(), entries.end());
  for (auto& [tname, file] : entries) weight_map.set(tname, file);
  json::Value index = json::Value::object();
  json::Value metadata = json::Value::object();
  metadata.set("total_size", total);
  index.set("metadata", metadata);
  index.set("weight_map", weight_map);
  write_atomic(out / "model.safetensors.index.json", index.dump(2) + "\n");
}

void Accelerator::save(const nn::NamedTensors& state, const std::string& path) {
  if (!is_main_process()) return;
  const fs::path p = path;
  if (!p.parent_path().empty()) fs::create_directories(p.parent_path());
  data::save_safetensors(path, nn::remove_tied_duplicates(state), {{"format", "pt"}});
}

namespace accelerate {

int64_t parse_size(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ' ') s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t digits = 0;
  while (digits < s.size() && ((s[digits] >= '0' && s[digits] <= '9') || s[digits] == '.')) ++digits;
  BRISK_CHECK(digits > 0, "parse_size: expected a size such as 10GB, 500MB, 2GiB or a byte count, got '", text, "'");
  const double number = std::stod(s.substr(0, digits));
  const std::string unit = s.substr(digits);
  double mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else if (unit == "KIB")
    mult = 1024.0;
  else if (unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  BRISK_CHECK(mult > 0, "parse_size: unknown unit '", text.substr(digits), "' in '", text,
              "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  BRISK_CHECK(number * mult >= 1, "parse_size: the size must be at least one byte, got '", text, "'");
  return static_cast<int64_t>(number * mult);
}

}  // namespace accelerate

}  // namespace brisk
