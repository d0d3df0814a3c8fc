// load_state (docs/checkpoints.md): every rank reads and checks everything it needs first (the
// manifest, state.json, its own rank file and the files they name, against the prepared
// objects); only when every rank succeeded is anything changed. Also is_complete_checkpoint.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "accelerator_impl.h"
#include "brisk/autograd/grad_mode.h"
#include "brisk/core/rng.h"
#include "brisk/data/safetensors.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/trace.h"
#include "checkpoint_fields.h"
#include "checkpoint_format.h"
#include "checkpoint_shards.h"

namespace brisk {

namespace fs = std::filesystem;
using namespace accelerate::detail;  // the checkpoint's format, checks and shards (checkpoint_*.h)

namespace accelerate {

bool is_complete_checkpoint(const std::string& dir, std::string* why) {
  try {
    CheckpointFolder folder(dir, "");
    if (!folder.lists(kState)) folder.fail(kManifest, " does not list ", kState);
    for (const auto& [name, entry] : folder.files()) folder.verify(name);
  } catch (const Error& e) {
    if (why) *why = e.message();
    return false;
  }
  if (why) why->clear();
  return true;
}

}  // namespace accelerate

// What load_state reads and checks before it changes anything.
struct Accelerator::LoadedCheckpoint {
  struct Loader {
    uint64_t epoch = 0;
    int64_t position = 0;
    // Resumed on another number of processes with another global batch: the position does not
    // carry over, the run continues at the next epoch.
    bool restart = false;
    // Saved inside the loop over the loader (rank files say so since `in_loop` exists; older ones
    // never): at the end of the epoch, that loop ends at once rather than run the next epoch.
    bool in_loop = false;
  };
  int64_t saved_world = 1;
  bool has_generator = true;  // false: this rank had no counterpart in the saved run
  std::vector<data::NamedTensors> models;
  // zero3, per model: this rank's saved parameter blocks, loaded straight into its shards (the
  // model file then holds the rest); empty: `models` holds the full parameters.
  std::vector<std::vector<Tensor>> param_blocks;
  std::vector<std::map<std::string, Tensor>> gradients;  // per model; empty: none saved
  std::vector<optim::StateDict> optimizers;
  std::vector<optim::StateDict> schedulers;
  std::optional<optim::StateDict> scaler;
  std::vector<Loader> loaders;
  Generator::State generator{};
  std::vector<const json::Value*> custom;
  std::optional<uint64_t> seed;
  int64_t step = 0;
  json::Value state, rank;  // the parsed documents (custom points into state)
};

// read(): state.json's shared state (the models, optimizers, schedulers, scaler and registered
// state, each checked against the prepared object), then the rank files, into a LoadedCheckpoint.
class Accelerator::CheckpointReader {
 public:
  CheckpointReader(const Accelerator& acc, const std::string& dir, LoadedCheckpoint& out)
      : a_(acc),
        dir_(dir),
        folder_(dir, "Accelerator::load_state: '" + dir + "' is not a complete checkpoint: "),
        sf_((fs::path(dir) / kState).string()),
        out_(out) {}

  void read() {
    read_state_header();
    read_models();
    read_optimizers();
    read_schedulers();
    read_scaler();
    read_custom();
    check_saved_ranks();
    read_own_rank_file();
  }

 private:
  // Listed JSON file `name`, parsed (errors through `f`, which names the file).
  json::Value parse(const std::string& name, const Fields& f) const {
    const std::string bytes = folder_.read(name, kMaxJsonBytes);
    try {
      return json::parse(bytes);
    } catch (const Error& e) {
      f.fail("", "not valid JSON: ", e.message());
    }
  }

  // state.json: what every rank shares; first its format, version, processes, step and seed.
  void read_state_header() {
    out_.state = parse(kState, sf_);
    st_ = &sf_.object(out_.state, "");
    const json::Value& st = *st_;
    if (sf_.string(sf_.member(st, "", "format"), "format") != kFormat) sf_.fail("format", "not a brisk checkpoint");
    version_ = sf_.integer(sf_.member(st, "", "version"), "version", 0, kMaxCount);
    if (version_ < kOldestVersion || version_ > kVersion)
      sf_.fail("version", "checkpoint format version ", version_, "; this brisk reads versions ", kOldestVersion,
               " to ", kVersion,
               version_ == 1
                   ? " (version 1 kept only the main process's gradients: resume it with the brisk that wrote it)"
                   : "");
    saved_world_ = sf_.integer(sf_.member(st, "", "num_processes"), "num_processes", 1, kMaxCount);
    out_.saved_world = saved_world_;
    out_.step = sf_.integer(sf_.member(st, "", "step"), "step", 0, kMaxCount);
    const json::Value& seed = sf_.member(sf_.member(st, "", "config"), "config", "seed");
    if (!seed.is_null()) out_.seed = sf_.uinteger(seed, "config.seed");
  }

  void read_models() {
    const auto& models = sf_.array(sf_.member(*st_, "", "models"), "models", a_.models_.size(), "model(s)");
    for (size_t i = 0; i < models.size(); ++i) read_model(i, models[i]);
  }

  // Model i's tensors, each checked against the prepared model; every tensor of it present.
  void read_model(size_t i, const json::Value& entry) {
    const nn::Module& model = *a_.models_[i]->model;
    const std::string key = Fields::index("models", i);
    const std::string& file = sf_.string(sf_.member(entry, key, "file"), key + ".file");
    std::map<std::string, Tensor> targets;
    for (auto& [name, t] : model.state_dict()) targets.emplace(name, t);
    out_.param_blocks.emplace_back();
    const json::Value* shards = entry.find("shards");
    std::set<std::string> have;
    if (version_ >= 3 && shards && !shards->is_null()) {
      // zero3 parameter shards: checked against the prepared model, then either this rank's own
      // file straight into its shards (the same processes and layout: nothing else is read but
      // the other files' presence), or the full parameters rebuilt from every rank's file.
      const SavedParamShards saved = parse_param_shards(sf_, folder_, entry, key, saved_world_, &targets);
      std::map<std::string, Tensor> rest = targets;
      for (const SavedParamShards::Bucket& b : saved.buckets)
        for (const SavedParamShards::Param& p : b.params) {
          rest.erase(p.name);
          have.insert(p.name);
        }
      out_.models.push_back(checked_tensors(sf_, folder_, file, key + ".file", rest,
                                            "tensor of the prepared model outside its parameter shards"));
      const auto engines = param_engines(a_.optimizers_, model);
      if (saved_world_ == a_.world_size_ && !engines.empty() &&
          param_shards(model, engines, a_.world_size_).layout.dump() == saved.layout.dump()) {
        for (int64_t r = 0; r < saved_world_; ++r)
          if (r != a_.rank_) folder_.check_present(saved.files[static_cast<size_t>(r)]);
        out_.param_blocks.back() = read_param_shard(sf_, folder_, saved, a_.rank_, key);
      } else {
        for (auto& e : gather_param_shards(sf_, folder_, saved, key)) out_.models.back().push_back(std::move(e));
      }
    } else {
      out_.models.push_back(
          checked_tensors(sf_, folder_, file, key + ".file", targets, "tensor of the prepared model"));
    }
    for (auto& [name, t] : out_.models.back()) have.insert(name);
    for (auto& [name, t] : nn::remove_tied_duplicates(model.state_dict()))
      if (!have.count(name)) sf_.fail(key + ".file", file, " lacks the model's tensor ", quoted(name));
  }

  void read_optimizers() {
    const auto& opts =
        sf_.array(sf_.member(*st_, "", "optimizers"), "optimizers", a_.optimizers_.size(), "optimizer(s)");
    for (size_t i = 0; i < opts.size(); ++i) read_optimizer(i, opts[i]);
  }

  // Optimizer i's state: as saved when this job has the same layout (this rank's shard, from the
  // list of every rank's, under sharding), else re-sharded (checkpoint_optimizer_shards.cpp).
  void read_optimizer(size_t i, const json::Value& entry) {
    const std::string key = Fields::index("optimizers", i);
    const optim::Optimizer& opt = *a_.optimizers_[i]->opt;
    const std::string& name = sf_.string(sf_.member(entry, key, "name"), key + ".name");
    if (name != opt.name()) sf_.fail(key + ".name", "the checkpoint has ", name, " but ", opt.name(), " was prepared");
    const json::Value* shards = entry.find("shards");
    const bool sharded = shards && !shards->is_null();
    const ZeroEngine* zero = a_.optimizers_[i]->zero.get();
    const json::Value* layout = entry.find("layout");
    if (sharded != (zero != nullptr) || saved_world_ != a_.world_size_ ||
        (sharded && layout && layout->dump() != layout_json(zero->layout()).dump())) {
      out_.optimizers.push_back(reshard_optimizer(sf_, folder_, entry, key, opt, zero, saved_world_, a_.rank_));
      return;
    }
    optim::StateDict sd;
    sd.scalars = optimizer_scalars(sf_, sf_.member(entry, key, "scalars"), key + ".scalars", opt);
    const std::string& file =
        sharded ? listed_name(sf_, folder_,
                              sf_.string(sf_.array(*shards, key + ".shards", static_cast<size_t>(a_.world_size_),
                                                   "shard(s)")[static_cast<size_t>(a_.rank_)],
                                         Fields::index(key + ".shards", static_cast<size_t>(a_.rank_))),
                              key + ".shards")
                : listed_name(sf_, folder_, sf_.string(sf_.member(entry, key, "file"), key + ".file"), key + ".file");
    sd.tensors = optimizer_tensors(file, key + ".file", opt.all_params());
    out_.optimizers.push_back(std::move(sd));
  }

  // The state tensors of `file`: state.<parameter index>.<name>, each shaped like its parameter.
  data::NamedTensors optimizer_tensors(const std::string& file, const std::string& at,
                                       const std::vector<Tensor>& params) const {
    data::SafetensorsFile probe = read_safetensors(sf_, folder_, file, at);
    for (auto& [tname, t] : probe.tensors) {
      const int64_t idx = state_slot(tname, nullptr);
      if (idx < 0 || idx >= static_cast<int64_t>(params.size()))
        sf_.fail(at, file, " has a tensor ", quoted(tname),
                 " that is not state.<parameter index>.<name> of one of the ", params.size(), " parameters");
      const Tensor& p = params[static_cast<size_t>(idx)];
      if (t.sizes() != p.sizes() || t.dtype() != p.dtype())
        sf_.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but parameter ", idx,
                 " is ", dtype_name(p.dtype()), " ", p.sizes());
    }
    return std::move(probe.tensors);
  }

  void read_schedulers() {
    const Fields& sf = sf_;
    const auto& scheds =
        sf.array(sf.member(*st_, "", "schedulers"), "schedulers", a_.schedulers_.size(), "scheduler(s)");
    for (size_t i = 0; i < scheds.size(); ++i) {
      const std::string key = Fields::index("schedulers", i) + ".scalars";
      optim::StateDict sd;
      sd.scalars = checked_scalars(sf, sf.member(scheds[i], Fields::index("schedulers", i), "scalars"), key,
                                   a_.schedulers_[i]->state_dict().scalars,
                                   [&](const std::string& k, const json::Value& x, const std::string& at) {
                                     if (k == "last_step") return static_cast<double>(sf.integer(x, at, 0, kMaxCount));
                                     if (k.rfind("base_lrs.", 0) == 0) return sf.number(x, at, 0, HUGE_VAL);
                                     return sf.number(x, at, -HUGE_VAL, HUGE_VAL);
                                   });
      out_.schedulers.push_back(std::move(sd));
    }
  }

  // The GradScaler's state (fp16): a positive scale, growth above 1, back-off in (0, 1), the
  // tracker below the interval.
  void read_scaler() {
    const Fields& sf = sf_;
    const json::Value& scaler = sf.member(*st_, "", "scaler");
    if (!a_.scaler_) return;
    if (scaler.is_null())
      sf.fail("scaler", "the checkpoint has no GradScaler state (it was saved without mixed_precision fp16)");
    const std::map<std::string, double> current = a_.scaler_->state_dict().scalars;
    optim::StateDict sd;
    sd.scalars = checked_scalars(sf, scaler, "scaler", current,
                                 [&](const std::string& k, const json::Value& x, const std::string& at) -> double {
                                   if (k == "scale") return sf.number(x, at, 0, HUGE_VAL, true);
                                   if (k == "growth_factor") return sf.number(x, at, 1, HUGE_VAL, true);
                                   if (k == "backoff_factor") {
                                     const double b = sf.number(x, at, 0, 1, true);
                                     if (b >= 1) sf.fail(at, "expected a number in (0, 1), got ", x.dump());
                                     return b;
                                   }
                                   if (k == "growth_interval")
                                     return static_cast<double>(sf.integer(x, at, 1, kMaxCount));
                                   if (k == "growth_tracker")
                                     return static_cast<double>(sf.integer(x, at, 0, kMaxCount));
                                   return sf.number(x, at, -HUGE_VAL, HUGE_VAL);
                                 });
    if (sd.scalars.count("growth_tracker") && sd.scalars.count("growth_interval") &&
        sd.scalars["growth_tracker"] >= sd.scalars["growth_interval"])
      sf.fail("scaler.growth_tracker", "must be less than growth_interval (", sd.scalars["growth_interval"], "), got ",
              sd.scalars["growth_tracker"]);
    out_.scaler = std::move(sd);
  }

  // register_for_checkpointing's states, by name (pointers into out_.state).
  void read_custom() {
    const json::Value& custom = sf_.object(sf_.member(*st_, "", "custom"), "custom");
    for (const CustomState& c : a_.custom_) {
      const json::Value* v = custom.find(c.name);
      if (!v) sf_.fail(Fields::join("custom", c.name), "the checkpoint has no state registered under this name");
      out_.custom.push_back(v);
    }
  }

  // On another number of processes: every saved rank's file, which must hold no unsynchronised
  // gradients (they cannot be redistributed); this rank's random state from the saved rank of
  // the same number, when the saved run had one.
  void check_saved_ranks() {
    if (saved_world_ != a_.world_size_) {
      for (int64_t r = 0; r < saved_world_; ++r) {
        const Fields gf((fs::path(dir_) / rank_file(static_cast<int>(r))).string());
        const json::Value doc = parse(rank_file(static_cast<int>(r)), gf);
        if (gf.integer(gf.member(gf.object(doc, ""), "", "rank"), "rank", 0, kMaxCount) != r)
          gf.fail("rank", "the file belongs to another rank");
        const json::Value& g = gf.member(doc, "", "gradients");
        if (!g.is_array()) gf.fail("gradients", "expected an array");
        for (size_t i = 0; i < g.size(); ++i)
          if (!g.at(i).is_null())
            BRISK_THROW("Accelerator::load_state: '", dir_, "' was saved inside a gradient accumulation window: rank ",
                        r, " of the ", saved_world_,
                        " processes that saved it holds gradients its micro-steps accumulated "
                        "but had not synchronised yet, and such per-rank partial gradients cannot be "
                        "redistributed over ",
                        a_.world_size_, " process(es). Resume it on ", saved_world_,
                        " processes, or save where the gradients are synchronised (accelerator.sync_gradients() "
                        "true, after optimizer.step() and zero_grad()) to resume elsewhere (docs/checkpoints.md)");
        if (r == a_.rank_) out_.generator = generator(gf, doc);
      }
    }
    out_.has_generator = a_.rank_ < saved_world_;
  }

  Generator::State generator(const Fields& f, const json::Value& doc) const {
    const json::Value& gen = f.member(doc, "", "default_generator");
    Generator::State g{};
    g.seed = f.uinteger(f.member(gen, "default_generator", "seed"), "default_generator.seed");
    g.offset = f.uinteger(f.member(gen, "default_generator", "offset"), "default_generator.offset");
    return g;
  }

  // rank_<r>.json: this rank's own state. On another number of processes: the main process's
  // loader positions (every rank's are the same) and no gradients.
  void read_own_rank_file() {
    const bool same_world = saved_world_ == a_.world_size_;
    const int own = same_world ? a_.rank_ : 0;
    const Fields rf((fs::path(dir_) / rank_file(own)).string());
    out_.rank = parse(rank_file(own), rf);
    const json::Value& rs = rf.object(out_.rank, "");
    if (rf.integer(rf.member(rs, "", "rank"), "rank", 0, kMaxCount) != own)
      rf.fail("rank", "the file belongs to another rank");
    if (same_world) out_.generator = generator(rf, rs);
    read_loaders(rf, rs, same_world);
    read_gradients(rf, rs);
  }

  void read_loaders(const Fields& rf, const json::Value& rs, bool same_world) {
    const auto& loaders =
        rf.array(rf.member(rs, "", "data_loaders"), "data_loaders", a_.loaders_.size(), "data loader(s)");
    for (size_t i = 0; i < loaders.size(); ++i) {
      const std::string key = Fields::index("data_loaders", i);
      const LoaderState& l = *a_.loaders_[i];
      LoadedCheckpoint::Loader s;
      s.epoch = static_cast<uint64_t>(rf.integer(rf.member(loaders[i], key, "epoch"), key + ".epoch", 0, kMaxCount));
      const bool iterable = rf.boolean(rf.member(loaders[i], key, "iterable"), key + ".iterable");
      if (const json::Value* in_loop = loaders[i].find("in_loop")) s.in_loop = rf.boolean(*in_loop, key + ".in_loop");
      if (iterable != l.iterable)
        rf.fail(key + ".iterable", "the checkpoint's loader ", iterable ? "reads" : "does not read",
                " an IterableDataset but the prepared one ", l.iterable ? "does" : "does not");
      if (!same_world) {
        // The position counts this loader's batches: the same examples only with the same global batch.
        const json::Value* gb = loaders[i].find("global_batch");
        const int64_t saved_gb = gb ? rf.integer(*gb, key + ".global_batch", 1, kMaxCount) : -1;
        const int64_t pos = rf.integer(rf.member(loaders[i], key, "position"), key + ".position", 0, kMaxCount);
        if (saved_gb != l.global_batch(a_.s_.split_batches, a_.world_size_)) {
          s.restart = pos > 0;
          s.position = pos;
          out_.loaders.push_back(s);
          continue;
        }
      }
      const int64_t batches = l.iterable ? kMaxCount : static_cast<int64_t>(l.loader->batch_indices(s.epoch).size());
      s.position =
          rf.integer(rf.member(loaders[i], key, "position"), key + ".position", 0, same_world ? batches : kMaxCount);
      s.position = std::min(s.position, batches);
      out_.loaders.push_back(s);
    }
  }

  // The gradients this rank's micro-steps had accumulated (a save inside an accumulation window).
  void read_gradients(const Fields& rf, const json::Value& rs) {
    const auto& grads = rf.array(rf.member(rs, "", "gradients"), "gradients", a_.models_.size(), "model(s)");
    for (size_t i = 0; i < grads.size(); ++i) {
      out_.gradients.emplace_back();
      if (grads[i].is_null()) continue;
      const std::string key = Fields::index("gradients", i);
      std::map<std::string, Tensor> params;
      for (auto& [name, p] : a_.models_[i]->model->named_parameters()) params.emplace(name, p);
      for (auto& [name, t] :
           checked_tensors(rf, folder_, rf.string(grads[i], key), key, params, "parameter of the model"))
        out_.gradients.back()[name] = t;
    }
  }

  const Accelerator& a_;
  const std::string dir_;
  CheckpointFolder folder_;
  const Fields sf_;  // state.json
  LoadedCheckpoint& out_;
  const json::Value* st_ = nullptr;  // state.json's object, in out_.state
  int64_t version_ = 0, saved_world_ = 1;
};

std::string Accelerator::load_state(const std::string& dir) {
  finish_save();  // a save still being written in the background
  auto span = trace_span("load_state", "checkpoint");
  fs::path path;
  if (dir.empty()) {
    path = newest_checkpoint();
    BRISK_CHECK(!path.empty(), "Accelerator::load_state: no complete checkpoint under '", checkpoint_root(), "'");
  } else {
    path = dir;
  }

  // Everything is read and checked first, on every rank; only when every rank succeeded is
  // anything changed.
  LoadedCheckpoint ck;
  on_every_rank(pg_, world_size_, "Accelerator::load_state",
                [&] { CheckpointReader(*this, path.string(), ck).read(); });

  // zero3: a checkpoint of this job's own layout goes straight into this rank's shards; full
  // parameters (another layout or stage, an older format) are loaded into the gathered model and
  // written back into the shards. Every rank decides alike (from state.json and the layout).
  std::vector<FullParameters> gathered;
  for (size_t i = 0; i < models_.size(); ++i)
    if (ck.param_blocks[i].empty()) gathered.push_back(full_parameters(*models_[i]->model));
  for (size_t i = 0; i < models_.size(); ++i) {
    const bool direct = !ck.param_blocks[i].empty();
    models_[i]->model->load_state_dict(ck.models[i], !direct);
    if (direct) {
      const auto engines = param_engines(optimizers_, *models_[i]->model);
      const std::vector<Tensor> blocks = param_shards(*models_[i]->model, engines, world_size_).blocks;
      {
        NoGradGuard no_grad;
        for (size_t k = 0; k < blocks.size(); ++k) kernels::copy_(blocks[k], ck.param_blocks[i][k]);
      }
      // Units gathered now (load_state inside a full_parameters guard) show the loaded values.
      for (const ZeroEngine* e : engines) e->refresh_gathered();
    }
    for (auto& [name, p] : models_[i]->model->named_parameters()) {
      auto it = ck.gradients[i].find(name);
      if (it == ck.gradients[i].end()) {
        p.set_grad(Tensor());
        continue;
      }
      Tensor g = empty(p.sizes(), p.dtype(), p.device());
      kernels::copy_(g, it->second);
      p.set_grad(g);
    }
  }
  for (size_t i = 0; i < optimizers_.size(); ++i) optimizers_[i]->opt->load_state_dict(ck.optimizers[i]);
  // load_state_dict re-applies the rate; the gate must not interfere.
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(ck.schedulers[i]);
  if (scaler_) scaler_->load_state_dict(*ck.scaler);
  if (ck.has_generator) default_generator().set_state(ck.generator);
  // Each loader continues with the batch the saved run would have taken next.
  std::string restarted;
  for (size_t i = 0; i < loaders_.size(); ++i) {
    LoaderState& l = *loaders_[i];
    const uint64_t epoch = ck.loaders[i].epoch;
    const int64_t position = ck.loaders[i].position;
    if (ck.loaders[i].restart) {
      l.loader->set_epoch(epoch + 1);
      restarted += (restarted.empty() ? "" : ", ") + std::to_string(i);
      continue;
    }
    if (l.iterable) {
      // A stream cannot seek: a save in the middle of an epoch restarts that epoch.
      if (position > 0 && !l.at_end())
        print("Accelerator::load_state: data loader ", i,
              " reads an IterableDataset, which cannot resume mid-epoch;"
              " epoch ",
              epoch, " starts over");
      l.loader->set_epoch(position > 0 && l.at_end() ? epoch + 1 : epoch);
      continue;
    }
    const int64_t batches = static_cast<int64_t>(l.loader->batch_indices(epoch).size());
    if (position >= batches && !ck.loaders[i].in_loop) {
      l.loader->set_epoch(epoch + 1);
    } else {
      l.loader->set_epoch(epoch);
      l.loader->set_start_batch(position);
    }
  }
  if (!restarted.empty() && is_main_process())
    std::cerr << "brisk: warning: Accelerator::load_state: the checkpoint was saved by " << ck.saved_world
              << " process(es) with another global batch (per-process batch x processes) than this job's "
              << world_size_ << "; data loader(s) " << restarted
              << " cannot continue mid-epoch and start the next epoch (the rest of the saved epoch is skipped; "
                 "docs/checkpoints.md)\n";
  for (size_t i = 0; i < custom_.size(); ++i) custom_[i].load(*ck.custom[i]);
  // The shuffling seed is part of the loaders' state.
  if (ck.seed) {
    s_.seed = *ck.seed;
    sh_->seed = s_.seed;
  }
  step_ = ck.step;
  resumed_ = true;
  return path.string();
}

}  // namespace brisk
