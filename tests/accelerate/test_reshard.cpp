// In one process: a sharded (zero1 / zero2) checkpoint resumed unsharded and back (re-sliced
// optimizer state), a damaged shard layout refused, `brisk merge-weights` (byte for byte what
// save_model writes; clear errors) and `brisk estimate-memory` (figures against hand-computed
// numbers, bad input). The multi-process cases are run_reshard.sh's (zero_tests.cmake).
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "accelerate/checkpoint_util.h"

using namespace brisk;
using namespace brisk::testing;
namespace json = brisk::json;

namespace {

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// A net whose layers' sizes are odd; AdamW in two groups; several buckets (bucket_cap_mb tiny).
struct ShardTrainer {
  Accelerator acc;
  TinyNet net;
  optim::AdamW opt;
  data::DataLoader loader{tiny_data(48), {.batch_size = 4, .shuffle = true}};
  explicit ShardTrainer(Sharding s, double bucket_cap_mb = 0.0001)
      : acc({.sharding = s, .seed = 3, .bucket_cap_mb = bucket_cap_mb}),
        opt(std::vector<optim::ParamGroup<optim::AdamWOptions>>{
            {{net.f1.weight, net.f1.bias}, {.lr = 0.01, .weight_decay = 0.1}},
            {{net.f2.weight, net.f2.bias}, {.lr = 0.02, .weight_decay = 0.0}}}) {
    acc.prepare(net, opt, loader);
  }
  void run(int n) {
    int i = 0;
    for (auto& [x, y] : loader) {
      acc.backward(cross_entropy(net(x), y));
      opt.step();
      opt.zero_grad();
      if (++i == n) break;
    }
  }
};

// Every optimizer tensor of an unsharded AdamW, by name.
std::map<std::string, std::vector<float>> state_of(const optim::Optimizer& opt) {
  std::map<std::string, std::vector<float>> out;
  for (auto& [k, t] : opt.state_dict().tensors) out[k] = t.to_vector<float>();
  return out;
}

fs::path sharded_checkpoint(const std::string& name, Sharding s) {
  fs::path dir = fresh_folder(name) / "ckpt";
  ShardTrainer t(s);
  t.run(5);
  t.acc.save_state(dir.string());
  return dir;
}

std::string load_error_into(Sharding s, const fs::path& dir) {
  ShardTrainer t(s);
  try {
    t.acc.load_state(dir.string());
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST(Reshard, ShardedStateResumesUnshardedAndBackBitForBit) {
  for (Sharding s : {Sharding::Zero1, Sharding::Zero2}) {
    const fs::path dir = sharded_checkpoint(std::string("reshard_") + std::string(enum_name(s)), s);
    // Unsharded: one tensor per parameter, none of them zeros (each took 5 steps).
    ShardTrainer plain(Sharding::None);
    plain.acc.load_state(dir.string());
    const auto st = state_of(plain.opt);
    ASSERT_EQ(st.size(), 8u);  // 4 parameters x (exp_avg, exp_avg_sq)
    for (auto& [k, v] : st) {
      double sum = 0;
      for (float x : v) sum += std::fabs(x);
      EXPECT_GT(sum, 0) << k;
    }
    EXPECT_EQ(plain.opt.state_dict().scalars.at("state.3.step"), 5);
    EXPECT_EQ(plain.opt.state_dict().scalars.at("param_groups.1.lr"), 0.02);
    // Saved unsharded and loaded sharded again (the other stage), then saved and loaded unsharded:
    // the same state, bit for bit.
    const fs::path again = fresh_folder(std::string("reshard_again_") + std::string(enum_name(s))) / "ckpt";
    plain.acc.save_state(again.string());
    ShardTrainer other(s == Sharding::Zero1 ? Sharding::Zero2 : Sharding::Zero1);
    other.acc.load_state(again.string());
    const fs::path third = fresh_folder(std::string("reshard_third_") + std::string(enum_name(s))) / "ckpt";
    other.acc.save_state(third.string());
    ShardTrainer back(Sharding::None);
    back.acc.load_state(third.string());
    EXPECT_EQ(state_of(back.opt), st);
    EXPECT_EQ(flat_params(back.net), flat_params(plain.net));
  }
}

TEST(Reshard, AnotherBucketCapIsReSliced) {
  // Saved with buckets of ~100 bytes (several, some padded), resumed with one 25 MiB bucket.
  const fs::path dir = sharded_checkpoint("reshard_cap", Sharding::Zero2);
  ShardTrainer plain(Sharding::None);
  plain.acc.load_state(dir.string());
  ShardTrainer big(Sharding::Zero2, 25.0);
  big.acc.load_state(dir.string());
  const fs::path again = fresh_folder("reshard_cap_again") / "ckpt";
  big.acc.save_state(again.string());
  ShardTrainer back(Sharding::None);
  back.acc.load_state(again.string());
  EXPECT_EQ(state_of(back.opt), state_of(plain.opt));
}

TEST(Reshard, ADamagedShardLayoutIsRefusedNamingTheKey) {
  const fs::path pristine = sharded_checkpoint("reshard_layout", Sharding::Zero2);
  ASSERT_EQ(load_error_into(Sharding::None, pristine), "");
  auto edited = [&](const std::string& name, const std::function<void(json::Value&)>& edit) {
    const fs::path dir = copy_checkpoint(pristine, name);
    edit_json(dir, "state.json", [&](json::Value& st) { edit(st["optimizers"].as_array()[0]["layout"]); });
    return load_error_into(Sharding::None, dir);
  };
  EXPECT_HAS(edited("layout_numel",
                    [](json::Value& l) { l["buckets"].as_array()[0]["params"].as_array()[0].as_array()[1] = 999; }),
             "layout.buckets[0].params[0][1]");
  EXPECT_HAS(edited("layout_padded", [](json::Value& l) { l["buckets"].as_array()[0].set("padded", 1); }),
             "layout.buckets[0].padded");
  EXPECT_HAS(edited("layout_world", [](json::Value& l) { l.set("num_processes", 3); }), "num_processes");
  EXPECT_HAS(edited("layout_dropped", [](json::Value& l) { l["buckets"].as_array().pop_back(); }), "in no bucket");
  EXPECT_HAS(edited("layout_group", [](json::Value& l) { l["group_params"].as_array()[0] = 3; }),
             "layout.group_params[0]");
  // Without a layout (an older brisk), a sharded checkpoint cannot be re-sliced: it says so.
  {
    const fs::path dir = copy_checkpoint(pristine, "layout_missing");
    edit_json(dir, "state.json", [](json::Value& st) {
      json::Value& o = st["optimizers"].as_array()[0];
      json::Value copy = json::Value::object();
      for (const auto& [k, v] : o.items())
        if (k != "layout") copy.set(k, v);
      o = copy;
    });
    EXPECT_HAS(load_error_into(Sharding::None, dir), "without its shard layout");
  }
}

// --- zero3: per-rank parameter shards ------------------------------------------------------------

namespace {

// The parameters as the model holds them (zero3: gathered for the read).
std::vector<float> params_of(ShardTrainer& t) {
  auto full = t.acc.full_parameters(t.net);
  return flat_params(t.net);
}

// Trains 5 zero3 steps, saves a checkpoint into `dir` and returns the parameters it holds.
std::vector<float> save_zero3_checkpoint(const fs::path& dir) {
  ShardTrainer t(Sharding::Zero3);
  t.run(5);
  t.acc.save_state(dir.string());
  return params_of(t);
}

// Removes `name` from the folder and from its manifest (resealed).
void unlist(const fs::path& dir, const std::string& name) {
  fs::remove(dir / name);
  json::Value m = json::parse(slurp(dir / "manifest.json"));
  json::Value files = json::Value::array();
  for (const json::Value& f : m.at("files").as_array())
    if (f.at("path").as_string() != name) files.push_back(f);
  m.set("files", files);
  spit(dir / "manifest.json", m.dump(2) + "\n");
  reseal(dir);
}

// Rewrites the safetensors file `name` of the checkpoint through `edit` (its tensors and
// metadata), then reseals the manifest.
void edit_safetensors(const fs::path& dir, const std::string& name,
                      const std::function<void(data::NamedTensors&, std::map<std::string, std::string>&)>& edit) {
  data::SafetensorsFile f = data::parse_safetensors(slurp(dir / name));
  data::NamedTensors tensors;
  for (auto& [k, t] : f.tensors) tensors.emplace_back(k, contiguous(t));
  edit(tensors, f.metadata);
  spit(dir / name, data::safetensors_bytes(tensors, f.metadata));
  reseal(dir);
}

}  // namespace

// A zero3 checkpoint holds each rank's parameter shard (listed in the manifest and in state.json,
// with the layout that rebuilds the full tensors), not the full parameters: the model file holds
// none of them. It resumes under zero3 (the shard straight back) and unsharded (rebuilt), and
// zero1 / zero2 / none checkpoints resume under zero3, all with the same parameters and state.
TEST(Reshard, Zero3CheckpointHoldsParameterShards) {
  const fs::path dir = fresh_folder("zero3_shards") / "ckpt";
  const std::vector<float> params = save_zero3_checkpoint(dir);
  const std::string manifest = slurp(dir / "manifest.json");
  EXPECT_HAS(manifest, "\"model_shard0.safetensors\"");
  EXPECT_HAS(manifest, "\"optimizer_shard0.safetensors\"");
  const json::Value st = json::parse(slurp(dir / "state.json"));
  EXPECT_EQ(st.at("version").as_int(), 3);
  const json::Value& m = st.at("models").as_array()[0];
  ASSERT_TRUE(m.contains("shards") && m.contains("layout")) << m.dump();
  EXPECT_EQ(m.at("shards").dump(), "[\"model_shard0.safetensors\"]");
  EXPECT_EQ(m.at("layout").at("num_processes").as_int(), 1);
  EXPECT_TRUE(data::parse_safetensors(slurp(dir / "model.safetensors")).empty());
  const data::SafetensorsFile shard = data::parse_safetensors(slurp(dir / "model_shard0.safetensors"));
  EXPECT_EQ(shard.metadata.at("rank"), "0");
  EXPECT_EQ(shard.metadata.at("num_processes"), "1");
  EXPECT_EQ(shard.metadata.at("layout"), m.at("layout").dump());
  int64_t numel = 0;
  for (const auto& [name, t] : shard) numel += t.numel();
  EXPECT_EQ(numel, static_cast<int64_t>(params.size()));  // one process: no padding
  // Back under zero3 (straight into the shard), under none (rebuilt), then none -> zero3 and
  // zero2 -> zero3: the same parameters and optimizer state.
  ShardTrainer z3(Sharding::Zero3), plain(Sharding::None);
  z3.acc.load_state(dir.string());
  plain.acc.load_state(dir.string());
  EXPECT_EQ(params_of(z3), params);
  EXPECT_EQ(flat_params(plain.net), params);
  const auto state = state_of(plain.opt);
  for (Sharding from : {Sharding::None, Sharding::Zero2, Sharding::Zero3}) {
    const fs::path again = fresh_folder("zero3_shards_again_" + std::string(enum_name(from))) / "ckpt";
    ShardTrainer a(from);
    a.acc.load_state(dir.string());
    a.acc.save_state(again.string());
    ShardTrainer b(Sharding::Zero3), c(Sharding::None);
    b.acc.load_state(again.string());
    EXPECT_EQ(params_of(b), params) << "saved under " << enum_name(from);
    const fs::path third = fresh_folder("zero3_shards_third_" + std::string(enum_name(from))) / "ckpt";
    b.acc.save_state(third.string());
    c.acc.load_state(third.string());
    EXPECT_EQ(flat_params(c.net), params) << "saved under " << enum_name(from);
    EXPECT_EQ(state_of(c.opt), state) << "saved under " << enum_name(from);
  }
  // And it trains on from there alike under zero3 and unsharded.
  z3.run(3);
  plain.run(3);
  const std::vector<float> a = params_of(z3), b = flat_params(plain.net);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 + 1e-5 * std::fabs(b[i])) << i;
}

// Inside a full_parameters guard (the units gathered): save_state writes the gathered values,
// edits by hand included, and load_state's values show in the gathered parameters and stay after.
TEST(Reshard, Zero3SaveAndLoadInsideAFullParametersGuard) {
  const fs::path dir = fresh_folder("zero3_guard") / "ckpt";
  std::vector<float> saved;
  {
    ShardTrainer t(Sharding::Zero3);
    t.run(3);
    auto full = t.acc.full_parameters(t.net);
    {
      NoGradGuard no_grad;
      fill_(t.net.f1.bias.detach(), 0.5);
    }
    t.acc.save_state(dir.string());
    saved = flat_params(t.net);
  }
  ShardTrainer plain(Sharding::None);
  plain.acc.load_state(dir.string());
  EXPECT_EQ(flat_params(plain.net), saved);
  EXPECT_EQ(plain.net.f1.bias.to_vector<float>(), std::vector<float>(plain.net.f1.bias.numel(), 0.5f));
  ShardTrainer z3(Sharding::Zero3);
  {
    auto full = z3.acc.full_parameters(z3.net);
    z3.acc.load_state(dir.string());
    EXPECT_EQ(flat_params(z3.net), saved);
  }
  EXPECT_EQ(params_of(z3), saved);
}

// A zero3 checkpoint of format version 2 (its model file held the full parameters, gathered by
// the main process) still loads, under zero3 and unsharded.
TEST(Reshard, Zero3CheckpointOfVersion2StillLoads) {
  const fs::path pristine = fresh_folder("zero3_v2_src") / "ckpt";
  const std::vector<float> params = save_zero3_checkpoint(pristine);
  // What version 2 wrote: the full model in model.safetensors, no shard files, no shards/layout.
  const fs::path dir = copy_checkpoint(pristine, "zero3_v2");
  spit(dir / "model.safetensors", accelerate::merged_model_weights(dir.string()));
  unlist(dir, "model_shard0.safetensors");
  edit_json(dir, "state.json", [](json::Value& st) {
    st.set("version", 2);
    json::Value m = json::Value::object();
    m.set("file", "model.safetensors");
    st["models"].as_array()[0] = m;
  });
  ASSERT_TRUE(accelerate::is_complete_checkpoint(dir.string()));
  ShardTrainer z3(Sharding::Zero3), plain(Sharding::None);
  z3.acc.load_state(dir.string());
  plain.acc.load_state(dir.string());
  EXPECT_EQ(params_of(z3), params);
  EXPECT_EQ(flat_params(plain.net), params);
  EXPECT_TRUE(accelerate::merged_model_weights(dir.string()) == accelerate::merged_model_weights(pristine.string()));
  // Version 2 knew no parameter shards: a version-2 state.json that lists them is read as version 2.
  edit_json(dir, "state.json", [](json::Value& st) { st.set("version", 4); });
  EXPECT_HAS(load_error_into(Sharding::Zero3, dir), "this brisk reads versions 2 to 3");
}

// A missing, damaged or inconsistent parameter shard file is an error naming the file and what
// is wrong; nothing is loaded.
TEST(Reshard, ABadZero3ParameterShardIsRefusedNamingTheFile) {
  const fs::path pristine = fresh_folder("zero3_bad_src") / "ckpt";
  save_zero3_checkpoint(pristine);
  ASSERT_EQ(load_error_into(Sharding::Zero3, pristine), "");
  ASSERT_EQ(load_error_into(Sharding::None, pristine), "");
  auto both = [&](const fs::path& dir, const std::string& want) {
    for (Sharding s : {Sharding::Zero3, Sharding::None}) {
      ShardTrainer t(s);
      const std::vector<float> before = params_of(t);
      std::string e;
      try {
        t.acc.load_state(dir.string());
      } catch (const Error& err) {
        e = err.message();
      }
      EXPECT_HAS(e, want);
      EXPECT_EQ(params_of(t), before) << "a refused checkpoint changed the parameters";
    }
  };
  {  // missing (still listed in the manifest)
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_missing");
    fs::remove(dir / "model_shard0.safetensors");
    both(dir, "model_shard0.safetensors is missing");
    EXPECT_FALSE(accelerate::is_complete_checkpoint(dir.string()));
    try {
      accelerate::merged_model_weights(dir.string());
      ADD_FAILURE() << "merge-weights read a checkpoint without its parameter shard";
    } catch (const Error& e) {
      EXPECT_HAS(e.message(), "model_shard0.safetensors is missing");
    }
  }
  {  // missing and no longer listed
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_unlisted");
    unlist(dir, "model_shard0.safetensors");
    both(dir, "\"model_shard0.safetensors\" is not listed in manifest.json");
  }
  {  // damaged: one byte changed, the manifest not resealed
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_hash");
    std::string bytes = slurp(dir / "model_shard0.safetensors");
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    spit(dir / "model_shard0.safetensors", bytes);
    both(dir, "model_shard0.safetensors's SHA-256 does not match the manifest");
  }
  {  // the file says it was written by one of 2 processes
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_world");
    edit_safetensors(
        dir, "model_shard0.safetensors",
        [](data::NamedTensors&, std::map<std::string, std::string>& meta) { meta["num_processes"] = "2"; });
    both(dir, "model_shard0.safetensors was written by one of \"2\" processes");
  }
  {  // another rank's file
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_rank");
    edit_safetensors(dir, "model_shard0.safetensors",
                     [](data::NamedTensors&, std::map<std::string, std::string>& meta) { meta["rank"] = "1"; });
    both(dir, "model_shard0.safetensors was written by rank \"1\", expected rank 0");
  }
  {  // the file's layout is not state.json's
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_layout");
    edit_safetensors(dir, "model_shard0.safetensors",
                     [](data::NamedTensors&, std::map<std::string, std::string>& meta) {
                       meta["layout"] = "{\"num_processes\":1,\"buckets\":[]}";
                     });
    both(dir, "model_shard0.safetensors's parameter layout differs from the one state.json records");
  }
  {  // a block of the wrong size
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_block");
    edit_safetensors(dir, "model_shard0.safetensors", [](data::NamedTensors& t, std::map<std::string, std::string>&) {
      t[0].second = t[0].second.narrow(0, 0, t[0].second.numel() - 1).clone();
    });
    both(dir, "model_shard0.safetensors: \"bucket.");
  }
  {  // a parameter of another shape in state.json's layout (and the file's, kept alike)
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_shape");
    std::string layout;
    edit_json(dir, "state.json", [&](json::Value& st) {
      json::Value& p = st["models"].as_array()[0]["layout"]["buckets"].as_array()[0]["params"].as_array()[0];
      json::Value shape = json::Value::array();  // [1, ...]: as many elements, another shape
      shape.push_back(int64_t{1});
      for (const json::Value& d : p.at("shape").as_array()) shape.push_back(d);
      p.set("shape", shape);
      layout = st["models"].as_array()[0]["layout"].dump();
    });
    edit_safetensors(dir, "model_shard0.safetensors",
                     [&](data::NamedTensors&, std::map<std::string, std::string>& meta) { meta["layout"] = layout; });
    both(dir, "\"f2.bias\" is F32 [1, 3] but the prepared model's is F32 [3]");
  }
  {  // state.json lists two shard files for a checkpoint of one process
    const fs::path dir = copy_checkpoint(pristine, "zero3_bad_count");
    edit_json(dir, "state.json", [](json::Value& st) {
      st["models"].as_array()[0]["shards"].as_array().push_back(json::Value("model_shard1.safetensors"));
    });
    both(dir, "expected one parameter shard file for each of the 1 processes");
  }
}

// --- brisk merge-weights ------------------------------------------------------------------------

TEST(MergeWeights, EqualsSaveModelByteForByte) {
  for (Sharding s : {Sharding::None, Sharding::Zero2, Sharding::Zero3}) {
    const fs::path root = fresh_folder(std::string("merge_") + std::string(enum_name(s)));
    Accelerator acc({.sharding = s, .seed = 1});
    models::GPT2 net(models::GPT2Config::preset("tiny"));  // tied embedding and head
    optim::AdamW opt(net.param_groups({.lr = 1e-3, .weight_decay = 0.1}));
    acc.prepare(net, opt);
    Generator g(7);
    for (int i = 0; i < 2; ++i) {
      Tensor idx = randint(0, 256, {2, 16}, {.dtype = DType::I64}, &g);
      acc.backward(net.loss(net(idx), idx));
      opt.step();
      opt.zero_grad();
    }
    acc.save_state((root / "ckpt").string());
    acc.save_model(net, (root / "model").string());
    const std::string merged = accelerate::merged_model_weights((root / "ckpt").string());
    const std::string saved = slurp(root / "model" / "model.safetensors");
    ASSERT_FALSE(saved.empty());
    EXPECT_TRUE(merged == saved) << "merge-weights differs from save_model under " << enum_name(s);
  }
}

TEST(MergeWeights, ClearErrors) {
  auto error = [](const std::string& dir, size_t model = 0) {
    try {
      accelerate::merged_model_weights(dir, model);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string();
  };
  const fs::path root = fresh_folder("merge_errors");
  EXPECT_HAS(error((root / "nowhere").string()), "no such folder");
  fs::create_directories(root / "empty");
  EXPECT_HAS(error((root / "empty").string()), "no manifest.json");
  const fs::path pristine = sharded_checkpoint("merge_errors_ckpt", Sharding::Zero1);
  EXPECT_EQ(error(pristine.string()), "");
  EXPECT_HAS(error(pristine.string(), 1), "no model 1");
  // A truncated optimizer shard: the checkpoint is damaged, and the error names the file.
  const fs::path cut = copy_checkpoint(pristine, "merge_errors_cut");
  const std::string shard = slurp(cut / "optimizer_shard0.safetensors");
  spit(cut / "optimizer_shard0.safetensors", shard.substr(0, shard.size() / 2));
  EXPECT_HAS(error(cut.string()), "optimizer_shard0.safetensors has");
}

// --- brisk estimate-memory ----------------------------------------------------------------------

namespace {

// Runs the brisk CLI; returns its exit status and what it printed (stdout and stderr).
std::pair<int, std::string> brisk_cli(const std::string& args) {
  const std::string cmd = std::string(BRISK_CLI) + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  EXPECT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The rows of `brisk estimate-memory ... --json` by "stage/dtype".
std::map<std::string, json::Value> estimate(const std::string& args, json::Value* whole = nullptr) {
  auto [code, out] = brisk_cli("estimate-memory " + args + " --json");
  EXPECT_EQ(code, 0) << out;
  json::Value v = json::parse(out);
  std::map<std::string, json::Value> rows;
  for (const json::Value& r : v.at("rows").as_array())
    rows[r.at("stage").as_string() + "/" + r.at("dtype").as_string()] = r;
  if (whole) *whole = v;
  return rows;
}

int64_t at(const std::map<std::string, json::Value>& rows, const std::string& row, const std::string& key) {
  return rows.at(row).at(key).as_int();
}

}  // namespace

TEST(EstimateMemory, TinyGpt2MatchesHandComputedFigures) {
  // GPT-2 tiny: L 2, heads 2, C 64, T 64, V 256. Parameters (tied head once):
  // 12*2*64^2 + 13*2*64 + 256*64 + 64*64 + 2*64 = 98304 + 1664 + 16384 + 4096 + 128 = 120576.
  models::GPT2 net(models::GPT2Config::preset("tiny"));
  int64_t counted = 0;
  for (auto& [name, t] : nn::remove_tied_duplicates(net.named_parameters())) counted += t.numel();
  ASSERT_EQ(counted, 120576);
  json::Value whole;
  const auto rows = estimate("tiny --num_processes 4 --batch_size 8", &whole);
  EXPECT_EQ(whole.at("parameters").as_int(), 120576);
  // none: 4 bytes each for parameters and gradients, 8 for AdamW's two moments.
  EXPECT_EQ(at(rows, "none/fp32", "parameters"), 482304);
  EXPECT_EQ(at(rows, "none/fp32", "gradients"), 482304);
  EXPECT_EQ(at(rows, "none/fp32", "optimizer"), 964608);
  // zero1 / zero2: this rank's shard of 120576 / 4 = 30144 elements.
  EXPECT_EQ(at(rows, "zero1/fp32", "optimizer"), 8 * 30144);
  EXPECT_EQ(at(rows, "zero1/fp32", "gradients"), 4 * (120576 + 30144));
  EXPECT_EQ(at(rows, "zero2/fp32", "optimizer"), 8 * 30144);
  // zero1 / zero2 hold the whole parameters and the flat shard the optimizer steps.
  EXPECT_EQ(at(rows, "zero2/fp32", "parameters"), 4 * (120576 + 30144));
  // zero3: the shard, the root unit of the embeddings (256*64 + 64*64 = 20480) and two blocks
  // (12*64^2 + 13*64 = 49984 each: one computing, one prefetched), as zero_worker's gpt2 zero3
  // measures, at most the whole model (here the whole model: the tiny model has few units); the
  // gradients: the shard and three units in flight (the largest, a block).
  EXPECT_EQ(at(rows, "zero3/fp32", "parameters"), 4 * std::min<int64_t>(120576, 30144 + 20480 + 2 * 49984));
  EXPECT_EQ(at(rows, "zero3/fp32", "parameters"), 4 * 120576);
  const auto wide = estimate("small --num_processes 4 --batch_size 8", nullptr);
  const models::GPT2Config sc = models::GPT2Config::preset("small");
  const int64_t sp = sc.num_parameters(), C = sc.n_embd;
  EXPECT_EQ(
      at(wide, "zero3/fp32", "parameters"),
      4 * std::min<int64_t>(sp, (sp + 3) / 4 + sc.vocab_size * C + sc.block_size * C + 2 * (12 * C * C + 13 * C)));
  EXPECT_EQ(at(rows, "zero3/fp32", "gradients"), 4 * std::min<int64_t>(120576, 30144 + 3 * 49984));
  // Activations: L (15 B T C + 2 H B T^2) + B T C + 2 B T V elements
  // = 2 (491520 + 131072) + 32768 + 262144 = 1540096; x4 fp32, x2 bf16; the same under every stage.
  EXPECT_EQ(at(rows, "none/fp32", "activations"), 4 * 1540096);
  EXPECT_EQ(at(rows, "zero2/bf16", "activations"), 2 * 1540096);
  EXPECT_EQ(at(rows, "none/bf16", "parameters"), 482304);  // bf16 autocast: fp32 master weights
  EXPECT_EQ(at(rows, "none/fp32", "total"), 482304 + 482304 + 964608 + 4 * 1540096);
  // zero2 with small buckets: the shard and three buckets of 0.1 MiB (26214 fp32 elements) in flight.
  const auto small = estimate("tiny -n 4 --bucket_cap_mb 0.1");
  EXPECT_EQ(at(small, "zero2/fp32", "gradients"), 4 * (30144 + 3 * 26214));
  EXPECT_EQ(at(rows, "zero2/fp32", "gradients"), 4 * (30144 + 120576));  // 25 MiB buckets: the whole model
}

TEST(EstimateMemory, Zero1OptimizerStateIsOneNthOfNonePlusPadding) {
  // A safetensors file of 7x5 + 3 = 38 parameters (not a multiple of 4) and an integer buffer.
  const fs::path dir = fresh_folder("estimate_file");
  Generator g(1);
  data::save_safetensors(
      (dir / "m.safetensors").string(),
      {{"w", randn({7, 5}, {}, &g)}, {"b", randn({3}, {}, &g)}, {"steps", zeros({4}, {.dtype = DType::I64})}});
  for (const std::string opt : {"adamw", "sgd"}) {
    const int64_t k = opt == "adamw" ? 2 : 1;
    for (int n : {1, 2, 4, 8}) {
      const auto rows = estimate((dir / "m.safetensors").string() + " --optimizer " + opt + " -n " + std::to_string(n));
      const int64_t none = at(rows, "none/fp32", "optimizer"), z1 = at(rows, "zero1/fp32", "optimizer");
      EXPECT_EQ(none, 4 * k * 38);
      EXPECT_GE(z1 * n, none) << opt << " n " << n;
      EXPECT_LE(z1 * n - none, 4 * k * (n - 1)) << opt << " n " << n;  // the padding
      EXPECT_EQ(at(rows, "none/fp32", "activations"), -1);             // no architecture
    }
  }
  // The table: aligned columns, every stage.
  auto [code, out] = brisk_cli("estimate-memory " + (dir / "m.safetensors").string() + " -n 2");
  EXPECT_EQ(code, 0) << out;
  EXPECT_HAS(out, "stage  dtype  parameters");
  for (const char* s : {"\nnone ", "\nzero1", "\nzero2", "\nzero3"}) EXPECT_HAS(out, s);
}

TEST(EstimateMemory, BadInputIsAnErrorThatSaysWhy) {
  const fs::path dir = fresh_folder("estimate_bad");
  spit(dir / "junk.safetensors", "not a safetensors file");
  const std::pair<std::string, std::string> cases[] = {
      {"huge", "neither a GPT-2 preset (tiny, small, 124M, 350M)"},
      {"tiny -n 0", "--num_processes must be from 1"},
      {"tiny --dtypes fp8", "'fp8' is not valid"},
      {"tiny --optimizer lamb", "expected adamw or sgd"},
      {"tiny --seq_len 65", "--seq_len must be from 1 to the preset's context 64"},
      {(dir / "missing.safetensors").string(), "no such file"},
      {(dir / "junk.safetensors").string(), "junk.safetensors"},
      {"", "expected one MODEL"},
  };
  for (const auto& [args, why] : cases) {
    auto [code, out] = brisk_cli("estimate-memory " + args);
    EXPECT_NE(code, 0) << args;
    EXPECT_HAS(out, why);
  }
  auto [code, out] = brisk_cli("estimate-memory --help");
  EXPECT_EQ(code, 0);
  EXPECT_HAS(out, "usage: brisk estimate-memory");
}
