// Fuzzes the checkpoint loader: a folder of files (manifest.json, state.json, rank_0.json, the
// safetensors files, anything else) decoded from the input, written to a scratch folder on
// /dev/shm, then checked with is_complete_checkpoint and loaded with Accelerator::load_state into
// prepared objects (a small net, Adam, StepLR, a data loader, a registered value). Any input must
// load or throw brisk::Error, without a crash, a leak, a hang (a named pipe, /dev/zero) or a
// read outside the folder. `brisk merge-weights` (accelerate::merged_model_weights) reads it too.
//
// Input: byte 0 = flags; then records (1 byte file index into kNames, 2 bytes little-endian
// length, the bytes). Flag 1: the harness writes a manifest that lists every file with its true
// size and SHA-256 and a right checksum (as anyone can), so the fuzzer gets past the checksums
// into the state files and the tensors; flag 2: "model.safetensors" is replaced by a symbolic
// link to the data; flag 4: a named pipe "pipe.safetensors" is added; flag 8: a symbolic link
// "zero.safetensors" to /dev/zero is added (the last two listed by a harness-made manifest as
// empty files).
//
// Seeds: BRISK_FUZZ_CHECKPOINT_SEEDS=<folder> fuzz_checkpoint writes a real checkpoint, encoded,
// and crafted variants of it into <folder> and exits (tests/fuzz/corpus/checkpoint/ holds them).
#include <brisk/brisk.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = brisk::json;
using namespace brisk;

namespace {

const char* const kNames[] = {"manifest.json",
                              "state.json",
                              "rank_0.json",
                              "model.safetensors",
                              "optimizer.safetensors",
                              "gradients_rank0.safetensors",
                              "extra.json",
                              "rank_1.json",
                              "model_shard0.safetensors"};
constexpr size_t kNumNames = sizeof kNames / sizeof kNames[0];

struct Net : nn::Module {
  nn::Linear f1{4, 3}, f2{3, 2};
  Net() { register_modules({{"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override { return f2(relu(f1(x))); }
};

struct Setup {
  Accelerator acc{AcceleratorOptions{.gradient_accumulation_steps = 2, .seed = 1}};
  Net net;
  optim::Adam opt{net.parameters(), {.lr = 0.01}};
  optim::StepLR sched{opt, 3, 0.5};
  data::DataLoader loader{std::make_shared<data::TensorDataset>(randn({12, 4}), zeros({12}, {.dtype = DType::I64})),
                          {.batch_size = 4, .shuffle = true, .seed = 2}};
  int64_t done = 0;
  fs::path dir;
  Setup() {
    acc.prepare(net, opt, loader, sched);
    acc.register_for_checkpointing(
        "done", [this] { return json::Value(done); }, [](const json::Value& v) { (void)v.dump(); });
    dir = fs::path("/dev/shm/brisk_fuzz_checkpoint_" + std::to_string(::getpid())) / "ckpt";
    if (!fs::is_directory("/dev/shm")) dir = fs::temp_directory_path() / dir.parent_path().filename() / "ckpt";
    fs::create_directories(dir);
  }
  ~Setup() {
    std::error_code ec;
    fs::remove_all(dir.parent_path(), ec);
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A manifest for the files now in `dir` (symbolic links and pipes listed as empty files).
void write_manifest(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != "manifest.json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  json::Value files = json::Value::array();
  for (const std::string& n : names) {
    json::Value f = json::Value::object();
    const bool regular = fs::symlink_status(dir / n).type() == fs::file_type::regular;
    const std::string bytes = regular ? slurp(dir / n) : std::string();
    f.set("path", n);
    f.set("size", static_cast<int64_t>(bytes.size()));
    f.set("sha256", accelerate::sha256_hex(bytes));
    files.push_back(f);
  }
  json::Value m = json::Value::object();
  m.set("format", "brisk-checkpoint-manifest");
  m.set("version", 1);
  m.set("files", files);
  m.set("manifest_sha256", accelerate::sha256_hex(m.dump()));
  spit(dir / "manifest.json", m.dump(2) + "\n");
}

std::string encode(uint8_t flags, const std::vector<std::pair<size_t, std::string>>& files) {
  std::string out(1, static_cast<char>(flags));
  for (const auto& [index, bytes] : files) {
    const size_t n = std::min<size_t>(bytes.size(), 0xffff);
    out += static_cast<char>(index);
    out += static_cast<char>(n & 0xff);
    out += static_cast<char>(n >> 8);
    out.append(bytes, 0, n);
  }
  return out;
}

// A real checkpoint of the prepared objects, encoded, and crafted variants (each with a
// harness-made manifest, so that it reaches the check it is aimed at).
void write_seeds(const fs::path& out) {
  Setup& s = setup();
  // Some training, saved inside an accumulation window (gradients included).
  for (auto& [x, y] : s.loader) {
    auto a = s.acc.accumulate(s.net);
    s.acc.backward(cross_entropy(s.net(x), y));
    s.opt.step();
    s.opt.zero_grad();
    ++s.done;
    if (s.done == 1) break;
  }
  const fs::path ck = out.parent_path() / ".seed_checkpoint";
  fs::remove_all(ck);
  s.acc.save_state(ck.string());
  std::vector<std::pair<size_t, std::string>> files;
  for (size_t i = 0; i < kNumNames; ++i)
    if (fs::exists(ck / kNames[i])) files.emplace_back(i, slurp(ck / kNames[i]));
  fs::remove_all(ck);
  fs::create_directories(out);
  spit(out / "valid", encode(0, files));
  spit(out / "valid_resealed", encode(1, files));
  auto variant = [&](const std::string& name, size_t index, const std::function<void(json::Value&)>& edit,
                     uint8_t flags = 1) {
    auto copy = files;
    for (auto& [i, bytes] : copy)
      if (i == index) {
        json::Value v = json::parse(bytes);
        edit(v);
        if (index == 0) {  // a manifest edited by anyone: its own checksum recomputed
          json::Value body = json::Value::object();
          for (const auto& [k, x] : v.items())
            if (k != "manifest_sha256") body.set(k, x);
          v.set("manifest_sha256", accelerate::sha256_hex(body.dump()));
        }
        bytes = v.dump(2) + "\n";
      }
    spit(out / name, encode(flags, copy));
  };
  auto opt_scalar = [](const std::string& key, json::Value v) {
    return [key, v](json::Value& st) { st["optimizers"].as_array()[0]["scalars"].set(key, v); };
  };
  variant("abs_path", 1, [](json::Value& st) { st["models"].as_array()[0].set("file", "/etc/passwd"); });
  variant("dev_zero", 1, [](json::Value& st) { st["models"].as_array()[0].set("file", "/dev/zero"); });
  variant("dotdot", 1, [](json::Value& st) { st["models"].as_array()[0].set("file", "../ckpt/model.safetensors"); });
  variant("unlisted", 1, [](json::Value& st) { st["models"].as_array()[0].set("file", "not_there.safetensors"); });
  variant(
      "pipe", 1, [](json::Value& st) { st["optimizers"].as_array()[0].set("file", "pipe.safetensors"); }, 1 | 4);
  variant(
      "zero_link", 1, [](json::Value& st) { st["models"].as_array()[0].set("file", "zero.safetensors"); }, 1 | 8);
  variant(
      "symlink", 1, [](json::Value&) {}, 1 | 2);
  variant("num_params_negative", 1, opt_scalar("param_groups.0.num_params", json::Value(-1)));
  variant("num_params_huge", 1, opt_scalar("param_groups.0.num_params", json::Value(1e300)));
  variant("steps_huge", 1, opt_scalar("steps_taken", json::Value(1e300)));
  variant("step_fraction", 1, opt_scalar("state.0.step", json::Value(0.5)));
  variant("sched_negative", 1,
          [](json::Value& st) { st["schedulers"].as_array()[0]["scalars"].set("last_step", json::Value(-7)); });
  variant("position_huge", 2,
          [](json::Value& r) { r["data_loaders"].as_array()[0].set("position", json::Value(1e300)); });
  variant("seed_negative", 2, [](json::Value& r) { r["default_generator"].set("seed", json::Value(-1)); });
  variant("grads_abs", 2, [](json::Value& r) { r["gradients"].as_array()[0] = json::Value("/dev/zero"); });
  variant("version1", 1, [](json::Value& st) { st.set("version", 1); });
  variant(
      "manifest_abs", 0,
      [](json::Value& m) {
        json::Value f = json::Value::object();
        f.set("path", "/etc/passwd");
        f.set("size", 1);
        f.set("sha256", std::string(64, '0'));
        m["files"].push_back(f);
      },
      0);
  variant(
      "manifest_size_huge", 0, [](json::Value& m) { m["files"].as_array()[0].set("size", json::Value(1e300)); }, 0);

  // Resuming elsewhere (re-sharding; docs/checkpoints.md): saved by 2 processes outside an
  // accumulation window (both rank files, no gradients), and saved sharded by 1 process (the
  // optimizer's state one flat shard per group, with its layout). Both load.
  auto edit_file = [](std::vector<std::pair<size_t, std::string>>& fs_, size_t index,
                      const std::function<void(json::Value&)>& edit) {
    for (auto& [i, bytes] : fs_)
      if (i == index) {
        json::Value v = json::parse(bytes);
        edit(v);
        bytes = v.dump(2) + "\n";
      }
  };
  {
    auto copy = files;
    edit_file(copy, 1, [](json::Value& st) { st.set("num_processes", 2); });
    edit_file(copy, 2, [](json::Value& r) { r["gradients"].as_array()[0] = json::Value(); });
    std::string rank1;
    for (auto& [i, bytes] : copy)
      if (i == 2) {
        json::Value r = json::parse(bytes);
        r.set("rank", 1);
        rank1 = r.dump(2) + "\n";
      }
    copy.emplace_back(7, rank1);
    spit(out / "reshard_world2", encode(1, copy));
    edit_file(copy, 2,
              [](json::Value& r) { r["gradients"].as_array()[0] = json::Value("gradients_rank0.safetensors"); });
    spit(out / "reshard_world2_window", encode(1, copy));
  }
  {
    // Net: f1.weight 12, f1.bias 3, f2.weight 6, f2.bias 2; one bucket in reverse order.
    auto copy = files;
    edit_file(copy, 1, [](json::Value& st) {
      json::Value& o = st["optimizers"].as_array()[0];
      json::Value shards = json::Value::array();
      shards.push_back("optimizer.safetensors");
      o.set("shards", shards);
      json::Value layout =
          json::parse(R"({"num_processes": 1, "group_params": [4], "buckets": [{"group": 0, "padded": 23, )"
                      R"("params": [[3, 2], [2, 6], [1, 3], [0, 12]]}]})");
      o.set("layout", layout);
      json::Value sc = json::Value::object();
      for (const auto& [k, v] : o["scalars"].items())
        if (k.rfind("state.", 0) != 0 || k == "state.0.step") sc.set(k, v);
      sc.set("param_groups.0.num_params", 1);
      o.set("scalars", sc);
    });
    for (auto& [i, bytes] : copy)
      if (i == 4)
        bytes =
            data::safetensors_bytes({{"state.0.exp_avg", full({23}, 0.25)}, {"state.0.exp_avg_sq", full({23}, 0.5)}});
    spit(out / "reshard_sharded", encode(1, copy));
  }
  {
    // zero3 parameter shards (docs/checkpoints.md): the model file empty, the parameters in
    // model_shard0.safetensors (one bucket of all four, in reverse order), rebuilt for the
    // unsharded net; then a shard file whose metadata claims 2 processes, and a layout whose
    // offsets overlap.
    const std::string layout =
        R"({"num_processes":1,"buckets":[{"tensor":"bucket.0","dtype":"F32","padded":23,"shard":23,"params":[)"
        R"({"name":"f2.bias","shape":[2],"offset":0},{"name":"f2.weight","shape":[2,3],"offset":2},)"
        R"({"name":"f1.bias","shape":[3],"offset":8},{"name":"f1.weight","shape":[3,4],"offset":11}]}]})";
    auto shards = [&](const std::string& file_layout, const std::string& world, const std::string& state_layout) {
      auto copy = files;
      edit_file(copy, 1, [&](json::Value& st) {
        json::Value& m = st["models"].as_array()[0];
        json::Value names = json::Value::array();
        names.push_back("model_shard0.safetensors");
        m.set("shards", names);
        m.set("layout", json::parse(state_layout));
      });
      for (auto& [i, bytes] : copy)
        if (i == 3) bytes = data::safetensors_bytes({}, {{"format", "pt"}});
      copy.emplace_back(8, data::safetensors_bytes({{"bucket.0", arange(0, 23, 1, {.dtype = DType::F32})}},
                                                   {{"format", "brisk-zero3-parameter-shard"},
                                                    {"rank", "0"},
                                                    {"num_processes", world},
                                                    {"layout", file_layout}}));
      return copy;
    };
    spit(out / "zero3_shards", encode(1, shards(layout, "1", layout)));
    spit(out / "zero3_shards_world2", encode(1, shards(layout, "2", layout)));
    std::string overlap = layout;
    overlap.replace(overlap.find(R"("offset":8)"), 10, R"("offset":7)");
    spit(out / "zero3_shards_overlap", encode(1, shards(overlap, "1", overlap)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seeds = std::getenv("BRISK_FUZZ_CHECKPOINT_SEEDS")) {
    write_seeds(seeds);
    std::exit(0);
  }
  setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Setup& s = setup();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.dir, ec)) fs::remove(e.path(), ec);
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  size_t at = 1;
  while (at + 3 <= size) {
    const size_t index = data[at] % kNumNames;
    size_t n = data[at + 1] | (static_cast<size_t>(data[at + 2]) << 8);
    at += 3;
    n = std::min(n, size - at);
    spit(s.dir / kNames[index], std::string(reinterpret_cast<const char*>(data + at), n));
    at += n;
  }
  if (flags & 2) {
    const fs::path m = s.dir / "model.safetensors";
    if (fs::exists(m)) {
      fs::rename(m, s.dir.parent_path() / "model.safetensors", ec);
      fs::create_symlink(s.dir.parent_path() / "model.safetensors", m, ec);
    }
  }
  if (flags & 4) ::mkfifo((s.dir / "pipe.safetensors").c_str(), 0644);
  if (flags & 8) fs::create_symlink("/dev/zero", s.dir / "zero.safetensors", ec);
  if (flags & 1) write_manifest(s.dir);
  // BRISK_FUZZ_CHECKPOINT_VERBOSE=1: say what became of each input (to check the seeds).
  static const bool verbose = std::getenv("BRISK_FUZZ_CHECKPOINT_VERBOSE") != nullptr;
  try {
    (void)accelerate::is_complete_checkpoint(s.dir.string());
    s.acc.load_state(s.dir.string());
    if (verbose) std::fprintf(stderr, "loaded\n");
  } catch (const brisk::Error& e) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  try {
    (void)accelerate::merged_model_weights(s.dir.string());
  } catch (const brisk::Error&) {
  }
  return 0;
}
