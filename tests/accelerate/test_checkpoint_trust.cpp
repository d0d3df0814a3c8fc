// A checkpoint folder is untrusted input: anyone can rewrite its files and recompute the
// manifest. Only plain regular files inside the folder that the manifest lists are opened (no
// absolute paths, '..', devices, named pipes, symbolic links or unlisted files), sizes are checked
// before reading, every number is checked (type, range, consistency with the prepared objects)
// with an error naming the file and the key, and a refused checkpoint changes nothing. Also:
// per-rank state in per-rank files, and random damage (flipped bytes, truncation) always refused.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <random>

#include "accelerate/checkpoint_util.h"

using namespace brisk;
using namespace brisk::testing;
namespace json = brisk::json;

namespace {

const fs::path& pristine() {
  static const fs::path dir = make_checkpoint("trust_pristine");
  return dir;
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// The checkpoint's model file moved to `target`, state.json pointing there, the manifest resealed.
std::string load_with_model_file(const std::string& name, const std::string& file) {
  const fs::path dir = copy_checkpoint(pristine(), name);
  edit_json(dir, "state.json", [&](json::Value& st) { st["models"].as_array()[0].set("file", file); });
  return load_error(dir);
}

}  // namespace

TEST(CheckpointTrust, ThePristineCheckpointLoads) {
  EXPECT_EQ(load_error(pristine()), "");
  EXPECT_TRUE(accelerate::is_complete_checkpoint(pristine().string()));
}

TEST(CheckpointTrust, EveryRankHasItsOwnStateFile) {
  // Random state, loader positions and the gradients of an unfinished accumulation are per rank.
  auto rs = json::parse(slurp(pristine() / "rank_0.json"));
  EXPECT_EQ(rs.at("rank").as_int(), 0);
  EXPECT_TRUE(rs.contains("default_generator"));
  // Saved after run(5) broke out of its loop: the loader's next loop, epoch 1 from its start.
  EXPECT_EQ(rs.at("data_loaders")[0].at("epoch").as_int(), 1);
  EXPECT_EQ(rs.at("data_loaders")[0].at("position").as_int(), 0);
  EXPECT_FALSE(rs.at("data_loaders")[0].at("in_loop").as_bool());
  EXPECT_EQ(rs.at("gradients")[0].as_string(), "gradients_rank0.safetensors");
  EXPECT_TRUE(fs::exists(pristine() / "gradients_rank0.safetensors"));
  EXPECT_FALSE(fs::exists(pristine() / "gradients.safetensors"));
  auto st = json::parse(slurp(pristine() / "state.json"));
  EXPECT_FALSE(st.contains("data_loaders"));
  EXPECT_FALSE(st.at("models")[0].contains("gradients"));
  // A rank's file is checked to be its own.
  const fs::path dir = copy_checkpoint(pristine(), "other_rank");
  edit_json(dir, "rank_0.json", [](json::Value& r) { r.set("rank", 1); });
  const std::string e = load_error(dir);
  EXPECT_HAS(e, "rank_0.json");
  EXPECT_HAS(e, "another rank");
}

TEST(CheckpointTrust, AnAbsolutePathIsNeverOpened) {
  // A copy of the real model file outside the folder: it would load, were it opened.
  const fs::path outside = fresh_folder("abs_outside") / "model.safetensors";
  fs::copy_file(pristine() / "model.safetensors", outside);
  std::string e = load_with_model_file("abs", outside.string());
  EXPECT_HAS(e, "absolute path");
  EXPECT_HAS(e, "state.json");
  e = load_with_model_file("abs_dev_zero", "/dev/zero");
  EXPECT_HAS(e, "absolute path");
  // Listed in the manifest too: the manifest itself is refused.
  const fs::path dir = copy_checkpoint(pristine(), "abs_manifest");
  edit_json(dir, "state.json", [&](json::Value& st) { st["models"].as_array()[0].set("file", outside.string()); });
  reseal(dir, {{outside.string(), static_cast<int64_t>(fs::file_size(outside)), accelerate::sha256_file(outside)}});
  e = load_error(dir);
  EXPECT_HAS(e, "manifest.json: files[");
  EXPECT_HAS(e, "absolute path");
  EXPECT_FALSE(accelerate::is_complete_checkpoint(dir.string()));
}

TEST(CheckpointTrust, DotDotIsNeverFollowed) {
  const fs::path root = fresh_folder("dotdot");
  const fs::path dir = root / "ckpt";
  fs::copy(pristine(), dir, fs::copy_options::recursive);
  fs::copy_file(pristine() / "model.safetensors", root / "model.safetensors");
  edit_json(dir, "state.json",
            [&](json::Value& st) { st["models"].as_array()[0].set("file", "../model.safetensors"); });
  std::string e = load_error(dir);
  EXPECT_HAS(e, "'..'");
  reseal(dir, {{"../model.safetensors", static_cast<int64_t>(fs::file_size(root / "model.safetensors")),
                accelerate::sha256_file((root / "model.safetensors").string())}});
  e = load_error(dir);
  EXPECT_HAS(e, "manifest.json: files[");
  EXPECT_HAS(e, "'..'");
  // A name with a '/' that stays inside is refused as well: files sit directly in the folder.
  e = load_with_model_file("slash", "./model.safetensors");
  EXPECT_HAS(e, "'/'");
}

TEST(CheckpointTrust, ADeviceIsNeverRead) {
  const fs::path dir = copy_checkpoint(pristine(), "device");
  // /dev/zero under a name of the folder (root can make the node; otherwise a link to it).
  fs::remove(dir / "optimizer.safetensors");
  const bool node = ::mknod((dir / "optimizer.safetensors").c_str(), S_IFCHR | 0644, makedev(1, 5)) == 0;
  if (!node) fs::create_symlink("/dev/zero", dir / "optimizer.safetensors");
  const std::string e = load_error(dir);
  EXPECT_HAS(e, "optimizer.safetensors");
  EXPECT_HAS(e, node ? "a device" : "symbolic link");
  std::string why;
  EXPECT_FALSE(accelerate::is_complete_checkpoint(dir.string(), &why));
  EXPECT_HAS(why, "optimizer.safetensors");
}

TEST(CheckpointTrust, ANamedPipeIsNeverOpenedForReading) {
  const fs::path dir = copy_checkpoint(pristine(), "fifo");
  fs::remove(dir / "model.safetensors");
  ASSERT_EQ(::mkfifo((dir / "model.safetensors").c_str(), 0644), 0);
  // Listed with the size and checksum of an empty file: a reader that opened it would block.
  edit_json(dir, "manifest.json", [](json::Value& m) {
    for (json::Value& f : m["files"].as_array())
      if (f.at("path").as_string() == "model.safetensors") {
        f.set("size", 0);
        f.set("sha256", accelerate::sha256_hex(""));
      }
  });
  reseal(dir);
  const std::string e = load_error(dir);
  EXPECT_HAS(e, "model.safetensors");
  EXPECT_HAS(e, "named pipe");
  EXPECT_FALSE(accelerate::is_complete_checkpoint(dir.string()));
}

TEST(CheckpointTrust, AnUnlistedFileIsNeverOpened) {
  const fs::path dir = copy_checkpoint(pristine(), "unlisted");
  fs::copy_file(dir / "model.safetensors", dir / "extra.safetensors");
  edit_json(dir, "state.json", [](json::Value& st) { st["models"].as_array()[0].set("file", "extra.safetensors"); });
  const std::string e = load_error(dir);
  EXPECT_HAS(e, "\"extra.safetensors\" is not listed in manifest.json");
  // A file missing from the manifest's list is just as unreadable as one that is not there.
  const fs::path dir2 = copy_checkpoint(pristine(), "unlisted_state");
  edit_json(dir2, "manifest.json", [](json::Value& m) {
    json::Value files = json::Value::array();
    for (const json::Value& f : m.at("files").as_array())
      if (f.at("path").as_string() != "rank_0.json") files.push_back(f);
    m.set("files", files);
  });
  reseal(dir2);
  EXPECT_HAS(load_error(dir2), "\"rank_0.json\" is not listed");
}

TEST(CheckpointTrust, SizesAreCheckedBeforeReading) {
  // A listed size that is not the file's: refused before a byte is read (the checksum would
  // match: the manifest was resealed).
  for (int64_t delta : {int64_t{-1}, int64_t{1}, int64_t{1} << 40}) {
    const fs::path dir = copy_checkpoint(pristine(), "size" + std::to_string(delta));
    const auto real = static_cast<int64_t>(fs::file_size(dir / "model.safetensors"));
    json::Value m = json::parse(slurp(dir / "manifest.json"));
    for (json::Value& f : m["files"].as_array())
      if (f.at("path").as_string() == "model.safetensors") f.set("size", real + delta);
    spit(dir / "manifest.json", m.dump(2) + "\n");
    // Keep the wrong size: reseal recomputes entries of regular files, so rewrite its checksum only.
    json::Value body = json::Value::object();
    for (const auto& [k, v] : m.items())
      if (k != "manifest_sha256") body.set(k, v);
    m.set("manifest_sha256", accelerate::sha256_hex(body.dump()));
    spit(dir / "manifest.json", m.dump(2) + "\n");
    const std::string e = load_error(dir);
    EXPECT_HAS(e, "model.safetensors has " + std::to_string(real) + " bytes, the manifest says " +
                      std::to_string(real + delta));
  }
  // A negative or absurd size is refused when the manifest is read.
  const fs::path neg = copy_checkpoint(pristine(), "size_negative");
  std::string text = slurp(neg / "manifest.json");
  json::Value m = json::parse(text);
  m["files"].as_array()[0].set("size", -5);
  json::Value body = json::Value::object();
  for (const auto& [k, v] : m.items())
    if (k != "manifest_sha256") body.set(k, v);
  m.set("manifest_sha256", accelerate::sha256_hex(body.dump()));
  spit(neg / "manifest.json", m.dump(2) + "\n");
  EXPECT_HAS(load_error(neg), "must be an integer from 0 to 2^50, got -5");
  // A manifest bigger than any real one (a sparse 100 MB file) is refused before it is read.
  const fs::path big = copy_checkpoint(pristine(), "size_manifest");
  fs::resize_file(big / "manifest.json", 100 << 20);
  EXPECT_HAS(load_error(big), "more than the");
}

TEST(CheckpointTrust, ASymbolicLinkIsNeverFollowed) {
  // A link to an exact copy of the real file (so size and checksum match) is still refused.
  const fs::path elsewhere = fresh_folder("symlink_target") / "model.safetensors";
  const fs::path dir = copy_checkpoint(pristine(), "symlink");
  fs::copy_file(dir / "model.safetensors", elsewhere);
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(elsewhere, dir / "model.safetensors");
  reseal(dir);
  std::string e = load_error(dir);
  EXPECT_HAS(e, "model.safetensors is a symbolic link");
  EXPECT_FALSE(accelerate::is_complete_checkpoint(dir.string()));
  // The manifest too.
  const fs::path dir2 = copy_checkpoint(pristine(), "symlink_manifest");
  fs::rename(dir2 / "manifest.json", dir2.parent_path() / "manifest.json");
  fs::create_symlink(dir2.parent_path() / "manifest.json", dir2 / "manifest.json");
  EXPECT_HAS(load_error(dir2), "manifest.json is a symbolic link");
}

// --- every number is checked -------------------------------------------------------------------

namespace {

// Sets the value at `keys` (object keys, or array indices as numbers) of `file` and returns the
// load error.
std::string load_with(const std::string& name, const std::string& file, const std::function<void(json::Value&)>& edit) {
  const fs::path dir = copy_checkpoint(pristine(), name);
  edit_json(dir, file, edit);
  return load_error(dir);
}

json::Value& opt_scalars(json::Value& st) {
  return st["optimizers"].as_array()[0]["scalars"];
}

}  // namespace

TEST(CheckpointNumbers, OptimizerNumParamsMustMatchTheModel) {
  for (const json::Value& bad : {json::Value(-1), json::Value(1e300), json::Value(3), json::Value(2.5),
                                 json::Value("4"), json::Value(nullptr)}) {
    const std::string e = load_with("num_params", "state.json",
                                    [&](json::Value& st) { opt_scalars(st).set("param_groups.0.num_params", bad); });
    EXPECT_HAS(e, "state.json");
    EXPECT_HAS(e, "optimizers[0].scalars.param_groups.0.num_params");
  }
}

TEST(CheckpointNumbers, StepCountsAreNonNegativeIntegers) {
  for (const char* key : {"steps_taken", "state.0.step"})
    for (const json::Value& bad : {json::Value(-1), json::Value(1e300), json::Value(0.5), json::Value(true)}) {
      const std::string e = load_with("steps", "state.json", [&](json::Value& st) { opt_scalars(st).set(key, bad); });
      EXPECT_HAS(e, std::string("optimizers[0].scalars.") + key);
    }
  EXPECT_HAS(load_with("lr", "state.json", [](json::Value& st) { opt_scalars(st).set("param_groups.0.lr", -0.1); }),
             "param_groups.0.lr");
  EXPECT_HAS(load_with("beta", "state.json", [](json::Value& st) { opt_scalars(st).set("param_groups.0.beta1", 1.5); }),
             "param_groups.0.beta1");
  EXPECT_HAS(load_with("unknown", "state.json", [](json::Value& st) { opt_scalars(st).set("param_groups.7.lr", 0.1); }),
             "param_groups.7.lr: not a key");
  EXPECT_HAS(
      load_with("optname", "state.json", [](json::Value& st) { st["optimizers"].as_array()[0].set("name", "SGD"); }),
      "optimizers[0].name");
  EXPECT_HAS(load_with("step", "state.json", [](json::Value& st) { st.set("step", -3); }), "state.json: step");
  EXPECT_HAS(load_with("nproc", "state.json", [](json::Value& st) { st.set("num_processes", 1e300); }),
             "num_processes");
  EXPECT_HAS(load_with("version", "state.json", [](json::Value& st) { st.set("version", 1); }),
             "version 1 kept only the main process's gradients");
}

TEST(CheckpointNumbers, SchedulerStateIsChecked) {
  for (const json::Value& bad : {json::Value(-1), json::Value(1e300), json::Value("x")})
    EXPECT_HAS(load_with("sched", "state.json",
                         [&](json::Value& st) { st["schedulers"].as_array()[0]["scalars"].set("last_step", bad); }),
               "schedulers[0].scalars.last_step");
  EXPECT_HAS(load_with("sched_lr", "state.json",
                       [](json::Value& st) { st["schedulers"].as_array()[0]["scalars"].set("base_lrs.0", -1.0); }),
             "schedulers[0].scalars.base_lrs.0");
}

TEST(CheckpointNumbers, LoaderPositionsAndRandomStateAreChecked) {
  auto loader = [](json::Value& r) -> json::Value& { return r["data_loaders"].as_array()[0]; };
  for (const json::Value& bad : {json::Value(-1), json::Value(11), json::Value(1e300), json::Value(1.5)})
    EXPECT_HAS(load_with("pos", "rank_0.json", [&](json::Value& r) { loader(r).set("position", bad); }),
               "rank_0.json: data_loaders[0].position");
  EXPECT_HAS(load_with("epoch", "rank_0.json", [&](json::Value& r) { loader(r).set("epoch", -2); }),
             "data_loaders[0].epoch");
  EXPECT_HAS(load_with("iterable", "rank_0.json", [&](json::Value& r) { loader(r).set("iterable", true); }),
             "data_loaders[0].iterable");
  EXPECT_HAS(load_with("seed", "rank_0.json", [](json::Value& r) { r["default_generator"].set("seed", -1); }),
             "default_generator.seed");
  EXPECT_HAS(load_with("offset", "rank_0.json", [](json::Value& r) { r["default_generator"].set("offset", 0.5); }),
             "default_generator.offset");
  EXPECT_HAS(load_with("grads", "rank_0.json", [](json::Value& r) { r.set("gradients", json::Value::array()); }),
             "rank_0.json: gradients");
}

TEST(CheckpointNumbers, TensorsMustFitTheModel) {
  // A model file whose tensor has another dtype, or another shape.
  for (int variant = 0; variant < 2; ++variant) {
    const fs::path dir = copy_checkpoint(pristine(), "tensor_dtype");
    auto f = data::load_safetensors((dir / "model.safetensors").string());
    for (auto& [name, t] : f.tensors)
      if (name == "f1.weight") t = variant == 0 ? t.to(DType::F64) : t.narrow(0, 0, 2).contiguous();
    spit(dir / "model.safetensors", data::safetensors_bytes(f.tensors));
    reseal(dir);
    const std::string e = load_error(dir);
    EXPECT_HAS(e, "\"f1.weight\" is ");
    EXPECT_HAS(e, "models[0].file");
  }
}

TEST(CheckpointNumbers, GradScalerStateIsChecked) {
  AcceleratorOptions o{.mixed_precision = MixedPrecision::FP16, .gradient_accumulation_steps = 2, .seed = 4};
  const fs::path dir = fresh_folder("scaler") / "ckpt";
  {
    CkptTrainer t(o);
    t.run(2);
    t.acc.save_state(dir.string());
  }
  for (auto [key, bad] : std::vector<std::pair<std::string, json::Value>>{{"scale", json::Value(-1.0)},
                                                                          {"scale", json::Value(0)},
                                                                          {"growth_interval", json::Value(0)},
                                                                          {"growth_interval", json::Value(1e300)},
                                                                          {"growth_tracker", json::Value(-1)},
                                                                          {"growth_tracker", json::Value(1e9)},
                                                                          {"backoff_factor", json::Value(2.0)},
                                                                          {"growth_factor", json::Value(0.5)}}) {
    const fs::path d = copy_checkpoint(dir, "scaler_" + key);
    edit_json(d, "state.json", [&key = key, &bad = bad](json::Value& st) { st["scaler"].set(key, bad); });
    CkptTrainer t(o);
    std::string e;
    try {
      t.acc.load_state(d.string());
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_HAS(e, "scaler." + key);
  }
}

// --- random damage -----------------------------------------------------------------------------

TEST(CheckpointFaults, FlippedOrTruncatedBytesAreAlwaysRefused) {
  // 1,000 trials: one file of the checkpoint damaged (a bit flipped, a byte replaced, or the file
  // cut short) must make is_complete_checkpoint false and load_state throw, loading nothing.
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::directory_iterator(pristine()))
    files.emplace_back(e.path().filename().string(), slurp(e.path()));
  std::sort(files.begin(), files.end());
  const fs::path dir = fresh_folder("damage") / "ckpt";
  fs::create_directories(dir);
  for (auto& [name, bytes] : files) spit(dir / name, bytes);
  CkptTrainer t;
  const std::vector<float> before = flat_params(t.net);
  std::mt19937_64 rng(12345);
  int refused = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    auto& [name, bytes] = files[rng() % files.size()];
    std::string damaged = bytes;
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 2 || damaged.empty()) {
      damaged.resize(damaged.empty() ? 0 : rng() % damaged.size());
    } else {
      const size_t at = rng() % damaged.size();
      const auto old = static_cast<unsigned char>(damaged[at]);
      auto now = static_cast<unsigned char>(kind == 0 ? old ^ (1u << (rng() % 8)) : rng() % 256);
      if (now == old) now = static_cast<unsigned char>(old ^ 0x80);
      damaged[at] = static_cast<char>(now);
    }
    spit(dir / name, damaged);
    std::string why;
    const bool complete = accelerate::is_complete_checkpoint(dir.string(), &why);
    std::string e;
    try {
      t.acc.load_state(dir.string());
    } catch (const Error& err) {
      e = err.what();
    }
    spit(dir / name, bytes);
    EXPECT_FALSE(complete) << "trial " << trial << ": " << name << " damaged, still complete";
    ASSERT_FALSE(e.empty()) << "trial " << trial << ": " << name << " damaged (kind " << kind << "), still loaded";
    EXPECT_FALSE(why.empty());
    ++refused;
  }
  EXPECT_EQ(refused, 1000);
  EXPECT_EQ(flat_params(t.net), before);
  EXPECT_EQ(t.acc.load_state(dir.string()), dir.string());  // the undamaged checkpoint still loads
}

// The state-dict loaders themselves (for state dicts from anywhere, not only checkpoints): counts
// are checked before the cast that would be undefined behaviour.
TEST(CheckpointNumbers, StateDictLoadersCheckTheirCounts) {
  TinyNet net;
  optim::Adam opt(net.parameters(), {.lr = 0.01});
  optim::StepLR sched(opt, 3, 0.5);
  auto expect_refused = [](const std::function<void()>& load, const std::string& key) {
    std::string e;
    try {
      load();
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_HAS(e, "'" + key + "' must be");
  };
  for (double bad : {-1.0, 1e300, 0.5, std::nan("")}) {
    for (const std::string key : {"steps_taken", "state.0.step", "param_groups.0.num_params"}) {
      optim::StateDict sd = opt.state_dict();
      sd.scalars[key] = bad;
      expect_refused([&] { opt.load_state_dict(sd); }, key);
    }
    optim::StateDict ss = sched.state_dict();
    ss.scalars["last_step"] = bad;
    expect_refused([&] { sched.load_state_dict(ss); }, "last_step");
    amp::GradScaler scaler;
    for (const std::string key : {"growth_interval", "growth_tracker"}) {
      optim::StateDict gs = scaler.state_dict();
      gs.scalars[key] = bad;
      expect_refused([&] { scaler.load_state_dict(gs); }, key);
    }
  }
}

// Found by fuzz_checkpoint: a refused manifest leaked the folder's file descriptor (the reader's
// constructor threw after opening it), until "Too many open files". Refusals must not leak.
TEST(CheckpointTrust, RefusedCheckpointsLeakNoFileDescriptors) {
  auto open_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const fs::path dir = copy_checkpoint(pristine(), "fd_leak");
  spit(dir / "manifest.json", slurp(dir / "manifest.json") + " ");  // not in save_state's form
  const fs::path pipe_dir = copy_checkpoint(pristine(), "fd_leak_pipe");
  fs::remove(pipe_dir / "model.safetensors");
  ASSERT_EQ(::mkfifo((pipe_dir / "model.safetensors").c_str(), 0644), 0);
  CkptTrainer t;
  const size_t before = open_fds();
  for (int i = 0; i < 50; ++i)
    for (const fs::path& d : {dir, pipe_dir, copy_checkpoint(pristine(), "fd_leak_ok")}) {
      (void)accelerate::is_complete_checkpoint(d.string());
      try {
        t.acc.load_state(d.string());
      } catch (const Error&) {
      }
    }
  EXPECT_EQ(open_fds(), before);
}
