// zero3's parameters in a checkpoint (checkpoint_shards.h): each rank's blocks in a file of its
// own with the layout that rebuilds the full tensors, the layout read back and checked, and the
// full parameters rebuilt from every rank's file (load_state on another layout; `brisk
// merge-weights`, which writes a checkpoint's model as one safetensors file).
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "checkpoint_shards.h"

namespace brisk::accelerate::detail {

ParamShards param_shards(const nn::Module& model, const std::vector<const ZeroEngine*>& engines, int world) {
  ParamShards out;
  const nn::NamedTensors named = nn::remove_tied_duplicates(model.state_dict());
  json::Value buckets = json::Value::array();
  for (const ZeroEngine* e : engines) {
    const ZeroLayout l = e->layout();
    const std::vector<Tensor>& params = e->params();
    const std::vector<Tensor> blocks = e->shard_blocks();
    for (size_t k = 0; k < l.buckets.size(); ++k) {
      const ZeroLayout::Bucket& b = l.buckets[k];
      json::Value jb = json::Value::object();
      jb.set("tensor", "bucket." + std::to_string(out.blocks.size()));
      jb.set("dtype", std::string(traits(blocks[k].dtype()).safetensors_name));
      jb.set("padded", b.padded);
      jb.set("shard", b.padded / l.num_processes);
      json::Value ps = json::Value::array();
      int64_t offset = 0;
      for (const ZeroLayout::Member& m : b.members) {
        const Tensor& p = params[m.param];
        std::string name;
        for (const auto& [n, t] : named)
          if (t.is_same(p)) {
            name = n;
            break;
          }
        BRISK_CHECK(!name.empty(), "Accelerator::save_state (sharding zero3): a sharded parameter of shape ", p.sizes(),
                    " is not in the model's state dict");
        json::Value jp = json::Value::object();
        jp.set("name", name);
        json::Value shape = json::Value::array();
        for (int64_t d : p.sizes()) shape.push_back(d);
        jp.set("shape", shape);
        jp.set("offset", offset);
        ps.push_back(jp);
        offset += m.numel;
        out.names.insert(name);
      }
      jb.set("params", ps);
      buckets.push_back(jb);
      out.blocks.push_back(blocks[k]);
    }
  }
  out.layout = json::Value::object();
  out.layout.set("num_processes", world);
  out.layout.set("buckets", buckets);
  return out;
}

SavedParamShards parse_param_shards(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                    const std::string& key, int64_t saved_world,
                                    const std::map<std::string, Tensor>* targets) {
  SavedParamShards s;
  s.world = saved_world;
  const std::string lkey = key + ".layout";
  s.layout = f.member(entry, key, "layout");
  f.object(s.layout, lkey);
  for (const auto& [k, v] : s.layout.items())
    if (k != "num_processes" && k != "buckets") f.fail(Fields::join(lkey, k), "not a key of a parameter shard layout");
  const int64_t world = f.integer(f.member(s.layout, lkey, "num_processes"), lkey + ".num_processes", 1, 1 << 20);
  if (world != saved_world)
    f.fail(lkey + ".num_processes", "is ", world, " but the checkpoint was saved by ", saved_world, " processes");
  const json::Value& bs = f.member(s.layout, lkey, "buckets");
  if (!bs.is_array() || bs.size() == 0) f.fail(lkey + ".buckets", "expected a non-empty array");
  std::set<std::string> seen;
  for (size_t k = 0; k < bs.size(); ++k) {
    const std::string at = Fields::index(lkey + ".buckets", k);
    const json::Value& jb = f.object(bs.at(k), at);
    if (jb.size() != 5) f.fail(at, "expected exactly tensor, dtype, padded, shard and params");
    SavedParamShards::Bucket b;
    if (f.string(f.member(jb, at, "tensor"), at + ".tensor") != "bucket." + std::to_string(k))
      f.fail(at + ".tensor", "expected \"bucket.", k, "\"");
    b.dtype = f.string(f.member(jb, at, "dtype"), at + ".dtype");
    bool known = false;
    for (const DTypeTraits& t : kDTypeTable) known = known || (t.is_float && b.dtype == t.safetensors_name);
    if (!known) f.fail(at + ".dtype", "expected F64, F32, F16 or BF16, got ", quoted(b.dtype));
    b.padded = f.integer(f.member(jb, at, "padded"), at + ".padded", 1, kMaxCount);
    b.shard = f.integer(f.member(jb, at, "shard"), at + ".shard", 1, kMaxCount);
    if (b.padded % world != 0 || b.shard != b.padded / world)
      f.fail(at + ".shard", "expected padded / num_processes = ", b.padded, " / ", world, " (padded a multiple of ",
             world, "), got ", b.shard);
    const json::Value& ps = f.member(jb, at, "params");
    if (!ps.is_array() || ps.size() == 0) f.fail(at + ".params", "expected a non-empty array");
    int64_t offset = 0;
    for (size_t j = 0; j < ps.size(); ++j) {
      const std::string pat = Fields::index(at + ".params", j);
      const json::Value& jp = f.object(ps.at(j), pat);
      if (jp.size() != 3) f.fail(pat, "expected exactly name, shape and offset");
      SavedParamShards::Param p;
      p.name = f.string(f.member(jp, pat, "name"), pat + ".name");
      if (!seen.insert(p.name).second) f.fail(pat + ".name", quoted(p.name), " is listed a second time");
      const json::Value& shape = f.member(jp, pat, "shape");
      if (!shape.is_array() || shape.size() > 8) f.fail(pat + ".shape", "expected an array of at most 8 sizes");
      p.numel = 1;
      for (size_t d = 0; d < shape.size(); ++d) {
        p.shape.push_back(f.integer(shape.at(d), Fields::index(pat + ".shape", d), 0, kMaxCount));
        if (p.shape.back() != 0 && p.numel > kMaxCount / p.shape.back())
          f.fail(pat + ".shape", "more than 2^53 elements");
        p.numel *= p.shape.back();
      }
      p.offset = f.integer(f.member(jp, pat, "offset"), pat + ".offset", 0, kMaxCount);
      if (p.offset != offset)
        f.fail(pat + ".offset", "expected ", offset, " (the parameters lie one after the other), got ", p.offset);
      offset += p.numel;
      if (offset > b.padded) f.fail(at + ".padded", "the parameters need ", offset, " elements, more than ", b.padded);
      if (targets) {
        auto it = targets->find(p.name);
        if (it == targets->end()) f.fail(pat + ".name", quoted(p.name), " is not a tensor of the prepared model");
        if (it->second.sizes() != p.shape || b.dtype != traits(it->second.dtype()).safetensors_name)
          f.fail(pat, quoted(p.name), " is ", b.dtype, " ", p.shape, " but the prepared model's is ",
                 traits(it->second.dtype()).safetensors_name, " ", it->second.sizes());
      }
      b.params.push_back(std::move(p));
    }
    if (b.padded - offset >= world)
      f.fail(at + ".padded", "expected ", offset, " rounded up to a multiple of ", world, ", got ", b.padded);
    s.buckets.push_back(std::move(b));
  }
  const json::Value& names = f.member(entry, key, "shards");
  if (!names.is_array() || names.size() != static_cast<size_t>(saved_world))
    f.fail(key + ".shards", "expected one parameter shard file for each of the ", saved_world,
           " processes that saved the checkpoint, got ", names.is_array() ? std::to_string(names.size()) : "no array");
  for (size_t r = 0; r < names.size(); ++r) {
    const std::string at = Fields::index(key + ".shards", r);
    s.files.push_back(listed_name(f, folder, f.string(names.at(r), at), at));
  }
  return s;
}

std::vector<Tensor> read_param_shard(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     int64_t r, const std::string& key) {
  const std::string& file = s.files[static_cast<size_t>(r)];
  const std::string at = Fields::index(key + ".shards", static_cast<size_t>(r));
  data::SafetensorsFile sf = read_safetensors(f, folder, file, at);
  auto meta = [&](const char* name) -> const std::string& {
    auto it = sf.metadata.find(name);
    if (it == sf.metadata.end()) f.fail(at, file, " lacks the metadata key ", quoted(name));
    return it->second;
  };
  if (meta("format") != kParamShardFormat)
    f.fail(at, file, " is not a parameter shard (its metadata's format is ", quoted(meta("format")), ", expected ",
           quoted(kParamShardFormat), ")");
  if (meta("rank") != std::to_string(r))
    f.fail(at, file, " was written by rank ", quoted(meta("rank")), ", expected rank ", r);
  if (meta("num_processes") != std::to_string(s.world))
    f.fail(at, file, " was written by one of ", quoted(meta("num_processes")),
           " processes, but the checkpoint was saved by ", s.world, " (state.json's num_processes)");
  if (meta("layout") != s.layout.dump())
    f.fail(at, file, "'s parameter layout differs from the one state.json records at ", key, ".layout");
  if (sf.tensors.size() != s.buckets.size())
    f.fail(at, file, " holds ", sf.tensors.size(), " tensor(s), the layout has ", s.buckets.size(), " bucket(s)");
  std::vector<Tensor> blocks(s.buckets.size());
  for (auto& [name, t] : sf.tensors) {
    size_t k = s.buckets.size();
    for (size_t j = 0; j < s.buckets.size(); ++j)
      if (name == "bucket." + std::to_string(j)) k = j;
    if (k == s.buckets.size()) f.fail(at, file, " has a tensor ", quoted(name), " that is not a bucket of the layout");
    const SavedParamShards::Bucket& b = s.buckets[k];
    if (t.sizes() != std::vector<int64_t>{b.shard} || b.dtype != traits(t.dtype()).safetensors_name)
      f.fail(at, file, ": ", quoted(name), " is ", traits(t.dtype()).safetensors_name, " ", t.sizes(),
             " but the layout gives ", b.dtype, " [", b.shard, "]");
    blocks[k] = std::move(t);
  }
  return blocks;
}

nn::NamedTensors gather_param_shards(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     const std::string& key) {
  std::vector<Tensor> flats(s.buckets.size());
  for (int64_t r = 0; r < s.world; ++r) {
    const std::vector<Tensor> blocks = read_param_shard(f, folder, s, r, key);
    for (size_t k = 0; k < s.buckets.size(); ++k) {
      const SavedParamShards::Bucket& b = s.buckets[k];
      if (!flats[k].defined()) flats[k] = empty({b.padded}, blocks[k].dtype(), Device(kCPU));
      kernels::copy_(flats[k].narrow(0, r * b.shard, b.shard), blocks[k]);
    }
  }
  nn::NamedTensors out;
  for (size_t k = 0; k < s.buckets.size(); ++k)
    for (const SavedParamShards::Param& p : s.buckets[k].params)
      out.emplace_back(p.name, flats[k].narrow(0, p.offset, p.numel).view(p.shape));
  return out;
}

}  // namespace brisk::accelerate::detail

namespace brisk::accelerate {

std::string merged_model_weights(const std::string& dir, size_t model) {
  namespace fs = std::filesystem;
  using namespace detail;
  const std::string where = "merge-weights: '" + dir + "': ";
  std::error_code ec;
  if (!fs::exists(dir, ec)) BRISK_THROW(where, "no such folder");
  if (!fs::is_directory(dir, ec)) BRISK_THROW(where, "not a folder (expected a checkpoint folder from save_state)");
  CheckpointFolder folder(dir, where + "not a complete checkpoint: ");
  if (!folder.lists(kState)) folder.fail(kManifest, " does not list ", kState);
  // A damaged or truncated file anywhere (a model, an optimizer shard) is reported, not skipped.
  for (const auto& [name, entry] : folder.files()) folder.verify(name);
  const Fields sf((fs::path(dir) / kState).string());
  json::Value st;
  try {
    st = json::parse(folder.read(kState, kMaxJsonBytes));
  } catch (const Error& e) {
    BRISK_THROW(where, kState, " is not valid JSON: ", e.message());
  }
  sf.object(st, "");
  if (sf.string(sf.member(st, "", "format"), "format") != kFormat) sf.fail("format", "not a brisk checkpoint");
  const json::Value& models = sf.member(st, "", "models");
  if (!models.is_array() || models.size() == 0) sf.fail("models", "expected a non-empty array");
  if (model >= models.size())
    BRISK_THROW(where, "the checkpoint has ", models.size(), " model(s); there is no model ", model,
                " (--model counts from 0)");
  const std::string key = Fields::index("models", model);
  const std::string& file =
      listed_name(sf, folder, sf.string(sf.member(models.at(model), key, "file"), key + ".file"), key + ".file");
  data::SafetensorsFile weights;
  {
    const std::string bytes = folder.read(file);
    try {
      weights = data::parse_safetensors(bytes, (fs::path(dir) / file).string());
    } catch (const Error& e) {
      BRISK_THROW(where, e.message());
    }
  }
  // Every rank holds the whole parameters under none, zero1 and zero2 (and zero3 checkpoints of
  // format version 2 gathered them), so the main process's file is the whole model; a zero3
  // checkpoint's sharded parameters are rebuilt from every rank's shard file. Written again
  // exactly as save_model writes it (safetensors orders the tensors by dtype and name).
  const json::Value* shards = models.at(model).find("shards");
  if (shards && !shards->is_null()) {
    const int64_t saved_world = sf.integer(sf.member(st, "", "num_processes"), "num_processes", 1, kMaxCount);
    const SavedParamShards saved = parse_param_shards(sf, folder, models.at(model), key, saved_world, nullptr);
    nn::NamedTensors full = gather_param_shards(sf, folder, saved, key);
    for (const auto& [name, t] : full)
      if (weights.contains(name))
        sf.fail(key + ".file", file, " holds ", quoted(name), ", which the parameter shards hold too");
    for (auto& e : full) weights.tensors.push_back(std::move(e));
  }
  return data::safetensors_bytes(weights.tensors, {{"format", "pt"}});
}

}  // namespace brisk::accelerate
