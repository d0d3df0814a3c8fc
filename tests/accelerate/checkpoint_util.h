// Shared by the checkpoint tests: a small training setup that saves a checkpoint inside a
// gradient accumulation window, and the means to tamper with a checkpoint folder the way anyone
// can (rewrite a file, then recompute the manifest's sizes, checksums and its own checksum).
#pragma once
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/programs/tiny_net.h"
#include "common/scratch.h"

namespace brisk::testing {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline fs::path fresh_folder(const std::string& name) {
  fs::path d = fs::path(scratch() + "/brisk_ckpt_" + name).lexically_normal();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Adam, StepLR, dropout, a shuffled loader and 2-step gradient accumulation.
struct CkptTrainer {
  Accelerator acc;
  TinyNet net{0.2};
  optim::Adam opt{net.parameters(), {.lr = 0.01}};
  optim::StepLR sched{opt, 3, 0.5};
  data::DataLoader loader{tiny_data(40), {.batch_size = 4, .shuffle = true, .seed = 2}};
  int64_t done = 0;
  explicit CkptTrainer(AcceleratorOptions o = {.gradient_accumulation_steps = 2, .seed = 4}) : acc(std::move(o)) {
    acc.prepare(net, opt, loader, sched);
    acc.register_for_checkpointing(
        "done", [this] { return json::Value(done); }, [this](const json::Value& v) { done = v.as_int(); });
  }
  // n micro-steps.
  void run(int n) {
    for (int i = 0; i < n;)
      for (auto& [x, y] : loader) {
        auto s = acc.accumulate(net);
        acc.backward(cross_entropy(net(x), y));
        opt.step();
        sched.step();
        opt.zero_grad();
        ++done;
        if (++i == n) break;
      }
  }
};

// A checkpoint saved after 5 micro-steps (inside an accumulation window: gradients included).
inline fs::path make_checkpoint(const std::string& name) {
  const fs::path dir = fresh_folder(name) / "ckpt";
  CkptTrainer t;
  t.run(5);
  t.acc.save_state(dir.string());
  return dir;
}

inline fs::path copy_checkpoint(const fs::path& from, const std::string& name) {
  const fs::path to = fresh_folder(name) / "ckpt";
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

struct Listed {
  std::string path;
  int64_t size;
  std::string sha256;
};

// Rewrites manifest.json as anyone could: the entries of regular files recomputed from the files,
// the others kept, `extra` appended, and the manifest's own checksum recomputed.
inline void reseal(const fs::path& dir, const std::vector<Listed>& extra = {}) {
  namespace json = brisk::json;
  json::Value m = json::parse(slurp(dir / "manifest.json"));
  json::Value files = json::Value::array();
  auto add = [&](const std::string& path, int64_t size, const std::string& sha) {
    json::Value f = json::Value::object();
    f.set("path", path);
    f.set("size", size);
    f.set("sha256", sha);
    files.push_back(f);
  };
  for (const json::Value& f : m.at("files").as_array()) {
    const std::string name = f.at("path").as_string();
    const fs::path p = dir / name;
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() == fs::file_type::regular)
      add(name, static_cast<int64_t>(fs::file_size(p)), accelerate::sha256_file(p.string()));
    else
      add(name, f.at("size").as_int(), f.at("sha256").as_string());
  }
  for (const Listed& l : extra) add(l.path, l.size, l.sha256);
  json::Value body = json::Value::object();
  body.set("format", m.at("format"));
  body.set("version", m.at("version"));
  body.set("files", files);
  json::Value out = body;
  out.set("manifest_sha256", accelerate::sha256_hex(body.dump()));
  spit(dir / "manifest.json", out.dump(2) + "\n");
}

// Parses `file` of the checkpoint, lets `edit` change it, writes it back and reseals.
inline void edit_json(const fs::path& dir, const std::string& file, const std::function<void(json::Value&)>& edit) {
  json::Value v = json::parse(slurp(dir / file));
  edit(v);
  spit(dir / file, v.dump(2) + "\n");
  reseal(dir);
}

// load_state's error for `dir` ("" when it loaded); a refused checkpoint must change nothing.
inline std::string load_error(const fs::path& dir) {
  CkptTrainer t;
  const std::vector<float> before = flat_params(t.net);
  const Generator::State g = default_generator().state();
  try {
    t.acc.load_state(dir.string());
  } catch (const Error& e) {
    EXPECT_EQ(flat_params(t.net), before) << "a refused checkpoint changed the model";
    EXPECT_EQ(t.done, 0) << "a refused checkpoint changed the registered state";
    EXPECT_EQ(default_generator().state().offset, g.offset) << "a refused checkpoint changed the random state";
    return e.what();
  }
  return "";
}

}  // namespace brisk::testing
