// Checkpoints (docs/checkpoints.md): save_state / load_state with a checksummed manifest written
// last, atomic publication by renaming a finished temporary folder, automatic naming and
// total_limit; save_model (sharded safetensors + Hugging Face index) and save.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "accelerator_impl.h"
#include "brisk/core/fs.h"
#include "brisk/core/rng.h"
#include "brisk/data/safetensors.h"
#include "brisk/dist/trace.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"

namespace brisk {

namespace fs = std::filesystem;
namespace json = data::json;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kState = "state.json";
constexpr const char* kFormat = "brisk-checkpoint";
constexpr int kVersion = 1;

// Test hook: BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=k makes this process SIGKILL itself after
// writing k checkpoint files, as a crash half-way through a save would.
int files_written = 0;
void count_file_written() {
  ++files_written;
  if (const char* v = std::getenv("BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES"); v && std::atoi(v) == files_written)
    std::raise(SIGKILL);
}

void fsync_path(const fs::path& p, bool directory) {
  if (directory) io::fsync_dir(p.string(), "Accelerator::save_state");
}

// Writes bytes to path and fsyncs it (the folder it is in is published by a rename later).
void write_synced(const fs::path& path, const std::string& bytes) {
  io::write_file_synced(path.string(), bytes, "Accelerator::save_state");
  count_file_written();
}

// A temp file beside it, fsync, rename, fsync the folder (a reader sees the old file or the whole new one).
void write_atomic(const fs::path& path, const std::string& bytes) {
  io::write_file_atomic(path.string(), bytes, "Accelerator::save_state");
  count_file_written();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in.good(), "Accelerator::load_state: cannot open '", path.string(), "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json::Value scalars_json(const std::map<std::string, double>& m) {
  json::Value o = json::Value::object();
  for (const auto& [k, v] : m) o.set(k, v);
  return o;
}

std::map<std::string, double> json_scalars(const json::Value& o) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : o.items()) m[k] = v.as_double();
  return m;
}

// The manifest's own checksum: SHA-256 of its compact JSON without the checksum field.
std::string manifest_checksum(const json::Value& manifest) {
  json::Value body = json::Value::object();
  for (const auto& [k, v] : manifest.items())
    if (k != "manifest_sha256") body.set(k, v);
  return accelerate::sha256_hex(body.dump());
}

// checkpoint_<n> folders under root, by n.
std::vector<std::pair<int64_t, fs::path>> numbered_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "checkpoint_";
    if (!e.is_directory() || name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 15)
      continue;
    out.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string model_file(size_t i) {
  return i == 0 ? "model.safetensors" : "model_" + std::to_string(i) + ".safetensors";
}
std::string gradients_file(size_t i) {
  return i == 0 ? "gradients.safetensors" : "gradients_" + std::to_string(i) + ".safetensors";
}
std::string optimizer_file(size_t i) {
  return i == 0 ? "optimizer.safetensors" : "optimizer_" + std::to_string(i) + ".safetensors";
}
std::string rng_file(int rank) {
  return "random_states_" + std::to_string(rank) + ".json";
}

}  // namespace

namespace accelerate {

bool is_complete_checkpoint(const std::string& dir, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  const fs::path mpath = fs::path(dir) / kManifest;
  std::error_code ec;
  if (!fs::is_regular_file(mpath, ec)) return fail("no " + std::string(kManifest) + " (an unfinished save?)");
  json::Value m;
  try {
    m = json::parse(read_file(mpath));
  } catch (const Error& e) {
    return fail(std::string(kManifest) + " is not valid JSON: " + e.message());
  }
  if (!m.is_object() || !m.contains("manifest_sha256") || !m.contains("files"))
    return fail(std::string(kManifest) + " lacks files or manifest_sha256");
  if (manifest_checksum(m) != m.at("manifest_sha256").as_string())
    return fail(std::string(kManifest) + "'s own checksum does not match its contents");
  bool has_state = false;
  for (const json::Value& f : m.at("files").as_array()) {
    const std::string rel = f.at("path").as_string();
    const fs::path p = fs::path(dir) / rel;
    has_state |= rel == kState;
    if (!fs::is_regular_file(p, ec)) return fail("missing file " + rel);
    if (static_cast<int64_t>(fs::file_size(p, ec)) != f.at("size").as_int())
      return fail(rel + " has " + std::to_string(fs::file_size(p, ec)) + " bytes, the manifest says " +
                  std::to_string(f.at("size").as_int()));
    if (sha256_file(p.string()) != f.at("sha256").as_string()) return fail(rel + "'s SHA-256 does not match");
  }
  if (!has_state) return fail(std::string(kManifest) + " does not list " + kState);
  if (why) why->clear();
  return true;
}

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

std::string Accelerator::save_state(const std::string& dir) {
  auto span = dist::trace_span("save_state", "checkpoint");
  fs::path final_dir;
  if (dir.empty()) {
    BRISK_CHECK(s_.automatic_checkpoint_naming,
                "Accelerator::save_state: no folder given; pass one, or set automatic_checkpoint_naming "
                "(checkpoints then go to <project_dir>/checkpoints/checkpoint_<n>)");
    // The main process picks the number (one more than the highest there) and tells the others.
    const fs::path root = checkpoint_root();
    Tensor n = zeros({1}, {.dtype = DType::I64});
    if (is_main_process()) {
      fs::create_directories(root);
      auto existing = numbered_checkpoints(root);
      n.data<int64_t>()[0] = existing.empty() ? 0 : existing.back().first + 1;
    }
    if (world_size_ > 1) pg_->broadcast(n, {.root = 0});
    final_dir = root / ("checkpoint_" + std::to_string(n.item<int64_t>()));
  } else {
    final_dir = dir;
  }
  final_dir = final_dir.lexically_normal();
  if (final_dir.filename().empty()) final_dir = final_dir.parent_path();
  const fs::path parent = final_dir.parent_path().empty() ? fs::path(".") : final_dir.parent_path();
  const fs::path tmp = parent / ("." + final_dir.filename().string() + ".partial");

  if (is_main_process()) {
    fs::create_directories(parent);
    fs::remove_all(tmp);  // a save that died earlier
    fs::create_directories(tmp);
  }
  wait_for_everyone();

  // Every rank: its own random state.
  {
    const Generator::State g = default_generator().state();
    json::Value r = json::Value::object();
    r.set("rank", rank_);
    json::Value gen = json::Value::object();
    gen.set("seed", static_cast<uint64_t>(g.seed));
    gen.set("offset", static_cast<uint64_t>(g.offset));
    r.set("default_generator", gen);
    write_synced(tmp / rng_file(rank_), r.dump(2) + "\n");
  }
  if (is_main_process()) {
    json::Value st = json::Value::object();
    st.set("format", kFormat);
    st.set("version", kVersion);
    st.set("num_processes", world_size_);
    st.set("step", step_);
    json::Value cfg = json::Value::object();
    cfg.set("mixed_precision", s_.mixed_precision);
    cfg.set("gradient_accumulation_steps", s_.gradient_accumulation_steps);
    cfg.set("split_batches", s_.split_batches);
    cfg.set("even_batches", s_.even_batches);
    cfg.set("seed", s_.seed ? json::Value(static_cast<uint64_t>(*s_.seed)) : json::Value());
    st.set("config", cfg);

    json::Value models = json::Value::array();
    for (size_t i = 0; i < models_.size(); ++i) {
      nn::NamedTensors sd = nn::remove_tied_duplicates(models_[i]->model->state_dict());
      write_synced(tmp / model_file(i), data::safetensors_bytes(sd, {{"format", "pt"}}));
      json::Value m = json::Value::object();
      m.set("file", model_file(i));
      // Gradients accumulated by micro-steps that did not sync yet (saved in the middle of an
      // accumulation): without them the resumed run would step with part of its gradient.
      nn::NamedTensors grads;
      for (auto& [name, p] : models_[i]->model->named_parameters())
        if (p.grad().defined()) grads.emplace_back(name, p.grad());
      if (!grads.empty()) {
        write_synced(tmp / gradients_file(i), data::safetensors_bytes(grads));
        m.set("gradients", gradients_file(i));
      }
      models.push_back(m);
    }
    st.set("models", models);
    json::Value opts = json::Value::array();
    for (size_t i = 0; i < optimizers_.size(); ++i) {
      optim::StateDict sd = optimizers_[i]->opt->state_dict();
      write_synced(tmp / optimizer_file(i), data::safetensors_bytes(sd.tensors));
      json::Value o = json::Value::object();
      o.set("file", optimizer_file(i));
      o.set("name", optimizers_[i]->opt->name());
      o.set("scalars", scalars_json(sd.scalars));
      opts.push_back(o);
    }
    st.set("optimizers", opts);
    json::Value scheds = json::Value::array();
    for (optim::LRScheduler* s : schedulers_) {
      json::Value o = json::Value::object();
      o.set("scalars", scalars_json(s->state_dict().scalars));
      scheds.push_back(o);
    }
    st.set("schedulers", scheds);
    st.set("scaler", scaler_ ? scalars_json(scaler_->state_dict().scalars) : json::Value());
    json::Value loaders = json::Value::array();
    for (auto& l : loaders_) {
      json::Value o = json::Value::object();
      o.set("epoch", static_cast<uint64_t>(l->loader->epoch()));
      o.set("position", l->loader->position());
      o.set("iterable", l->iterable);
      loaders.push_back(o);
    }
    st.set("data_loaders", loaders);
    json::Value custom = json::Value::object();
    for (const CustomState& c : custom_) custom.set(c.name, c.save());
    st.set("custom", custom);
    write_synced(tmp / kState, st.dump(2) + "\n");
  }
  wait_for_everyone();  // every rank's file is on disk

  if (is_main_process()) {
    // The manifest, written last, lists every file with its size and SHA-256 and carries its
    // own checksum: it is what makes the checkpoint complete.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    json::Value files = json::Value::array();
    for (const std::string& name : names) {
      json::Value f = json::Value::object();
      f.set("path", name);
      f.set("size", static_cast<int64_t>(fs::file_size(tmp / name)));
      f.set("sha256", accelerate::sha256_file((tmp / name).string()));
      files.push_back(f);
    }
    json::Value m = json::Value::object();
    m.set("format", std::string(kFormat) + "-manifest");
    m.set("version", kVersion);
    m.set("files", files);
    m.set("manifest_sha256", manifest_checksum(m));
    write_synced(tmp / kManifest, m.dump(2) + "\n");
    fsync_path(tmp, true);
    // Publish: rename the finished folder into place (replacing an older one of that name).
    if (fs::exists(final_dir)) {
      const fs::path old = parent / ("." + final_dir.filename().string() + ".old");
      fs::remove_all(old);
      fs::rename(final_dir, old);
      fs::rename(tmp, final_dir);
      fs::remove_all(old);
    } else {
      fs::rename(tmp, final_dir);
    }
    fsync_path(parent, true);
    // total_limit: the oldest automatic checkpoints go once the new one is in place.
    if (dir.empty() && s_.total_limit) {
      auto existing = numbered_checkpoints(checkpoint_root());
      for (size_t i = 0; i + static_cast<size_t>(*s_.total_limit) < existing.size(); ++i)
        fs::remove_all(existing[i].second);
    }
  }
  wait_for_everyone();
  return final_dir.string();
}

std::string Accelerator::load_state(const std::string& dir) {
  auto span = dist::trace_span("load_state", "checkpoint");
  fs::path path;
  if (dir.empty()) {
    // The newest complete checkpoint, as the main process sees it.
    const fs::path root = checkpoint_root();
    Tensor n = full({1}, -1.0, {.dtype = DType::I64});
    if (is_main_process()) {
      auto existing = numbered_checkpoints(root);
      for (auto it = existing.rbegin(); it != existing.rend(); ++it)
        if (accelerate::is_complete_checkpoint(it->second.string())) {
          n.data<int64_t>()[0] = it->first;
          break;
        }
    }
    if (world_size_ > 1) pg_->broadcast(n, {.root = 0});
    BRISK_CHECK(n.item<int64_t>() >= 0, "Accelerator::load_state: no complete checkpoint under '", root.string(), "'");
    path = root / ("checkpoint_" + std::to_string(n.item<int64_t>()));
  } else {
    path = dir;
    std::string why;
    BRISK_CHECK(accelerate::is_complete_checkpoint(path.string(), &why), "Accelerator::load_state: '", path.string(),
                "' is not a complete checkpoint: ", why);
  }

  const json::Value st = json::parse(read_file(path / kState));
  BRISK_CHECK(st.at("format").as_string() == kFormat, "Accelerator::load_state: '", path.string(),
              "' is not a brisk checkpoint");
  const json::Value& models = st.at("models");
  const json::Value& opts = st.at("optimizers");
  const json::Value& scheds = st.at("schedulers");
  const json::Value& loaders = st.at("data_loaders");
  auto check_count = [&](size_t saved, size_t prepared, const char* what) {
    BRISK_CHECK(saved == prepared, "Accelerator::load_state: the checkpoint has ", saved, " ", what, " but ", prepared,
                " were prepared (prepare the same objects, in the same order, before load_state)");
  };
  check_count(models.size(), models_.size(), "model(s)");
  check_count(opts.size(), optimizers_.size(), "optimizer(s)");
  check_count(scheds.size(), schedulers_.size(), "scheduler(s)");
  check_count(loaders.size(), loaders_.size(), "data loader(s)");
  const int64_t saved_world = st.at("num_processes").as_int();
  BRISK_CHECK(saved_world == world_size_, "Accelerator::load_state: the checkpoint was saved by ", saved_world,
              " processes but this job has ", world_size_, " (each rank restores its own random state)");

  for (size_t i = 0; i < models_.size(); ++i) {
    data::SafetensorsFile f = data::load_safetensors((path / models[i].at("file").as_string()).string());
    models_[i]->model->load_state_dict(f.tensors, true);
    std::map<std::string, Tensor> grads;
    if (const json::Value* g = models[i].find("gradients"))
      for (auto& [name, t] : data::load_safetensors((path / g->as_string()).string()).tensors) grads[name] = t;
    for (auto& [name, p] : models_[i]->model->named_parameters()) {
      auto it = grads.find(name);
      if (it == grads.end()) {
        p.set_grad(Tensor());
        continue;
      }
      Tensor g = empty(p.sizes(), p.dtype(), p.device());
      kernels::copy_(g, it->second);
      p.set_grad(g);
    }
  }
  for (size_t i = 0; i < optimizers_.size(); ++i) {
    optim::StateDict sd;
    sd.tensors = data::load_safetensors((path / opts[i].at("file").as_string()).string()).tensors;
    sd.scalars = json_scalars(opts[i].at("scalars"));
    optimizers_[i]->opt->load_state_dict(sd);
  }
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    optim::StateDict sd;
    sd.scalars = json_scalars(scheds[i].at("scalars"));
    // load_state_dict re-applies the rate; the gate must not interfere.
    schedulers_[i]->load_state_dict(sd);
  }
  if (scaler_) {
    BRISK_CHECK(!st.at("scaler").is_null(),
                "Accelerator::load_state: the checkpoint has no GradScaler state "
                "(it was saved without mixed_precision fp16)");
    optim::StateDict sd;
    sd.scalars = json_scalars(st.at("scaler"));
    scaler_->load_state_dict(sd);
  }
  {
    const json::Value r = json::parse(read_file(path / rng_file(rank_)));
    const json::Value& g = r.at("default_generator");
    default_generator().set_state({g.at("seed").as_uint(), g.at("offset").as_uint()});
  }
  // Each loader continues with the batch the saved run would have taken next.
  for (size_t i = 0; i < loaders_.size(); ++i) {
    LoaderState& l = *loaders_[i];
    const uint64_t epoch = loaders[i].at("epoch").as_uint();
    const int64_t position = loaders[i].at("position").as_int();
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
    if (position >= batches) {
      l.loader->set_epoch(epoch + 1);
    } else {
      l.loader->set_epoch(epoch);
      l.loader->set_start_batch(position);
    }
  }
  for (const CustomState& c : custom_) {
    const json::Value* v = st.at("custom").find(c.name);
    BRISK_CHECK(v != nullptr, "Accelerator::load_state: the checkpoint has no state registered as '", c.name, "'");
    c.load(*v);
  }
  // The shuffling seed is part of the loaders' state.
  if (const json::Value* seed = st.at("config").find("seed"); seed && !seed->is_null()) {
    s_.seed = seed->as_uint();
    sh_->seed = s_.seed;
  }
  step_ = st.at("step").as_int();
  resumed_ = true;
  return path.string();
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir, const std::string& max_shard_size) {
  const int64_t limit = accelerate::parse_size(max_shard_size);
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

}  // namespace brisk
