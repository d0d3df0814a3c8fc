// Checkpoints in one process: save_state / load_state round trips, the manifest, automatic
// naming with total_limit, incomplete checkpoints being ignored, save_model's shards and index.
// (Resuming in a new process, and a save killed half-way: run_resume.sh.)
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "accelerate/programs/tiny_net.h"
#include "common/scratch.h"

using namespace brisk;
using brisk::testing::tiny_data;
using brisk::testing::TinyNet;
namespace fs = std::filesystem;

namespace {

std::string fresh_ckpt_dir(const std::string& name) {
  std::string d = fs::path(brisk::testing::scratch() + "/brisk_ckpt_" + name).lexically_normal().string();
  fs::remove_all(d);
  return d;
}

// A training setup; run(n) does n micro-steps and returns their losses (saving into save_dir
// after micro-step save_at, without leaving the loop: a new loop would start a new epoch).
struct CheckpointRun {
  Accelerator acc;
  TinyNet net{0.2};
  optim::Adam opt{net.parameters(), {.lr = 0.01}};
  optim::StepLR sched{opt, 3, 0.5};
  data::DataLoader loader{tiny_data(40), {.batch_size = 4, .shuffle = true, .seed = 2}};
  explicit CheckpointRun(const AcceleratorOptions& o) : acc(o) { acc.prepare(net, opt, loader, sched); }
  std::vector<double> run(int n, int save_at = -1, const std::string& save_dir = "") {
    std::vector<double> losses;
    while (static_cast<int>(losses.size()) < n)
      for (auto& [x, y] : loader) {
        auto s = acc.accumulate(net);
        Tensor loss = cross_entropy(net(x), y);
        acc.backward(loss);
        opt.step();
        sched.step();
        opt.zero_grad();
        losses.push_back(loss.item<double>());
        if (static_cast<int>(losses.size()) == save_at) acc.save_state(save_dir);
        if (static_cast<int>(losses.size()) == n) break;
      }
    return losses;
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Checkpoint, LoadStateContinuesExactlyWhereTheSaveWas) {
  const std::string dir = fresh_ckpt_dir("roundtrip");
  CheckpointRun a({.gradient_accumulation_steps = 2, .seed = 4});
  // Saved after micro-step 13: the middle of the second epoch (10 batches each), between two syncs.
  const std::vector<double> all = a.run(30, 13, dir);
  const std::vector<double> rest(all.begin() + 13, all.end());

  manual_seed(999);  // the load must restore the generator too
  CheckpointRun b({.gradient_accumulation_steps = 2, .seed = 1});
  EXPECT_EQ(b.acc.load_state(dir), dir);
  EXPECT_EQ(b.run(17), rest);
  EXPECT_EQ(brisk::testing::flat_params(b.net), brisk::testing::flat_params(a.net));
  EXPECT_EQ(b.sched.last_step(), a.sched.last_step());
  EXPECT_EQ(b.opt.steps_taken(), a.opt.steps_taken());
  EXPECT_EQ(b.loader.epoch(), a.loader.epoch());
  EXPECT_EQ(b.loader.position(), a.loader.position());
}

TEST(Checkpoint, ManifestListsEveryFileWithSizeAndSha256AndItsOwnChecksum) {
  const std::string dir = fresh_ckpt_dir("manifest");
  CheckpointRun a({});
  a.run(3);
  a.acc.save_state(dir);
  auto m = json::parse(read(fs::path(dir) / "manifest.json"));
  std::set<std::string> listed;
  for (const auto& f : m.at("files").as_array()) {
    const std::string name = f.at("path").as_string();
    listed.insert(name);
    EXPECT_EQ(f.at("size").as_int(), static_cast<int64_t>(fs::file_size(fs::path(dir) / name))) << name;
    EXPECT_EQ(f.at("sha256").as_string(), accelerate::sha256_file((fs::path(dir) / name).string())) << name;
  }
  std::set<std::string> on_disk;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != "manifest.json") on_disk.insert(e.path().filename().string());
  EXPECT_EQ(listed, on_disk);
  EXPECT_TRUE(listed.count("model.safetensors") && listed.count("optimizer.safetensors") &&
              listed.count("state.json") && listed.count("rank_0.json"));
  EXPECT_EQ(m.at("manifest_sha256").as_string().size(), 64u);
  EXPECT_TRUE(accelerate::is_complete_checkpoint(dir));
  // The state file carries the step and the config; the rank's own file its loader's epoch and
  // position and its random state.
  auto st = json::parse(read(fs::path(dir) / "state.json"));
  EXPECT_EQ(st.at("config").at("mixed_precision").as_string(), "no");
  auto rs = json::parse(read(fs::path(dir) / "rank_0.json"));
  // run(3) broke out of its loop after 3 batches: what comes next is the next loop's epoch.
  EXPECT_EQ(rs.at("data_loaders")[0].at("epoch").as_int(), 1);
  EXPECT_EQ(rs.at("data_loaders")[0].at("position").as_int(), 0);
  EXPECT_FALSE(rs.at("data_loaders")[0].at("in_loop").as_bool());
  EXPECT_EQ(rs.at("rank").as_int(), 0);
  // Any change to a listed file, or to the manifest itself, makes the checkpoint incomplete.
  {
    std::ofstream f(fs::path(dir) / "state.json", std::ios::app);
    f << " ";
  }
  std::string why;
  EXPECT_FALSE(accelerate::is_complete_checkpoint(dir, &why));
  EXPECT_NE(why.find("state.json"), std::string::npos) << why;
}

TEST(Checkpoint, AutomaticNamingKeepsTotalLimitAndLoadsTheNewestCompleteOne) {
  const std::string project = fresh_ckpt_dir("auto");
  CheckpointRun a({.project_dir = project, .automatic_checkpoint_naming = true, .total_limit = 2});
  std::vector<std::vector<float>> params;
  for (int i = 0; i < 4; ++i) {
    a.run(2);
    EXPECT_EQ(a.acc.save_state(), project + "/checkpoints/checkpoint_" + std::to_string(i));
    params.push_back(brisk::testing::flat_params(a.net));
  }
  EXPECT_FALSE(fs::exists(project + "/checkpoints/checkpoint_0"));
  EXPECT_FALSE(fs::exists(project + "/checkpoints/checkpoint_1"));
  EXPECT_TRUE(fs::exists(project + "/checkpoints/checkpoint_2"));
  EXPECT_TRUE(fs::exists(project + "/checkpoints/checkpoint_3"));

  CheckpointRun b({.project_dir = project, .automatic_checkpoint_naming = true});
  EXPECT_EQ(b.acc.load_state(), project + "/checkpoints/checkpoint_3");
  EXPECT_EQ(brisk::testing::flat_params(b.net), params[3]);
  // A checkpoint without its manifest (a save that died before the end) is passed over.
  fs::remove(project + "/checkpoints/checkpoint_3/manifest.json");
  // ... and so is a folder whose manifest does not match its files.
  fs::copy(project + "/checkpoints/checkpoint_2", project + "/checkpoints/checkpoint_7");
  fs::resize_file(project + "/checkpoints/checkpoint_7/model.safetensors", 16);
  CheckpointRun c({.project_dir = project, .automatic_checkpoint_naming = true});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(c.acc.load_state(), project + "/checkpoints/checkpoint_2");
  // Each folder passed over is named, with why.
  const std::string said = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(said.find("passing over " + project + "/checkpoints/checkpoint_7: "), std::string::npos) << said;
  EXPECT_NE(said.find("passing over " + project + "/checkpoints/checkpoint_3: "), std::string::npos) << said;
  EXPECT_NE(said.find("manifest.json"), std::string::npos) << said;
  EXPECT_EQ(brisk::testing::flat_params(c.net), params[2]);
  std::string e;
  try {
    c.acc.load_state(project + "/checkpoints/checkpoint_3");
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("not a complete checkpoint"), std::string::npos) << e;
}

// What a program restarted by `brisk launch --max-restarts` does (docs/fault-tolerance.md).
TEST(Checkpoint, ResumeOnRestartLoadsTheNewestCompleteOneOrStartsFromScratch) {
  const std::string project = fresh_ckpt_dir("restart");
  const AcceleratorOptions o{.project_dir = project, .automatic_checkpoint_naming = true};
  ::unsetenv("BRISK_RESTART_COUNT");
  {
    CheckpointRun first(o);
    EXPECT_EQ(first.acc.resume_on_restart(), "") << "a first attempt loads nothing";
    EXPECT_THROW(first.acc.resume_on_restart(/*resume=*/true), Error) << "--resume without a checkpoint";
  }
  ::setenv("BRISK_RESTART_COUNT", "1", 1);
  CheckpointRun early(o);
  EXPECT_EQ(early.acc.resume_on_restart(), "") << "a failure before the first checkpoint: from scratch";
  early.run(5);
  early.acc.save_state();
  const std::vector<double> rest = early.run(4);
  CheckpointRun restarted(o);
  EXPECT_EQ(restarted.acc.resume_on_restart(), project + "/checkpoints/checkpoint_0");
  EXPECT_EQ(restarted.run(4), rest);
  ::setenv("BRISK_RESTART_COUNT", "two", 1);
  EXPECT_THROW(restarted.acc.resume_on_restart(), Error) << "a malformed count is named";
  ::unsetenv("BRISK_RESTART_COUNT");
}

TEST(Checkpoint, LoadStateNeedsTheSameObjectsPrepared) {
  const std::string dir = fresh_ckpt_dir("mismatch");
  CheckpointRun a({});
  a.run(1);
  a.acc.save_state(dir);
  Accelerator acc;
  TinyNet net;
  acc.prepare(net);
  std::string e;
  try {
    acc.load_state(dir);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("optimizer"), std::string::npos) << e;
}

TEST(Checkpoint, SaveStateWithoutAFolderNeedsAutomaticNaming) {
  Accelerator acc;
  EXPECT_THROW(acc.save_state(), Error);
}

TEST(Checkpoint, ResumeAtTheEndOfAnEpochStartsTheNextOne) {
  const std::string dir = fresh_ckpt_dir("epoch_end");
  CheckpointRun a({});
  a.run(10);  // exactly one epoch
  a.acc.save_state(dir);
  const std::vector<double> rest = a.run(4);
  CheckpointRun b({});
  b.acc.load_state(dir);
  EXPECT_EQ(b.loader.epoch(), 1u);
  EXPECT_EQ(b.run(4), rest);
}

// The issue-37 bug: a loop cut short (--steps-per-epoch, a break) left the loader in the middle of
// its epoch; the checkpoint recorded that position, so the resumed run finished the old epoch
// while the run that never stopped started a new one.
TEST(Checkpoint, ResumeAfterALoopThatBrokeOutEarlyStartsTheNextEpochAsTheRunThatNeverStopped) {
  const std::string dir = fresh_ckpt_dir("broke_out");
  CheckpointRun a({});
  a.run(3);  // epoch 0: 3 of its 10 batches, then break
  a.run(3);  // epoch 1, the same
  a.acc.save_state(dir);
  const std::vector<double> rest = a.run(3);  // epoch 2 from its first batch
  const std::vector<double> rest2 = a.run(3);
  auto rs = json::parse(read(fs::path(dir) / "rank_0.json"));
  EXPECT_EQ(rs.at("data_loaders")[0].at("epoch").as_int(), 2) << "the epoch the next loop starts";
  EXPECT_EQ(rs.at("data_loaders")[0].at("position").as_int(), 0);
  CheckpointRun b({});
  b.acc.load_state(dir);
  EXPECT_EQ(b.run(3), rest);
  EXPECT_EQ(b.run(3), rest2);
  EXPECT_EQ(b.loader.epoch(), a.loader.epoch());
  EXPECT_EQ(brisk::testing::flat_params(b.net), brisk::testing::flat_params(a.net));
}

namespace {

struct Tied : nn::Module {
  nn::Linear a{6, 5}, b{5, 6};
  nn::Module tail;
  Tied() {
    tail.register_parameter("w", a.weight);  // the same tensor under a second name
    register_modules({{"a", a}, {"b", b}, {"tail", tail}});
  }
};

}  // namespace

TEST(SaveModel, ShardsWithAHuggingFaceIndexAndTiedWeightsOnce) {
  const std::string dir = fresh_ckpt_dir("save_model");
  Accelerator acc;
  Tied m;
  acc.save_model(m, dir, "130B");  // a.weight: 120 bytes per shard at most
  auto index = json::parse(read(fs::path(dir) / "model.safetensors.index.json"));
  const auto& wm = index.at("weight_map");
  int64_t total = 0;
  for (const std::string name : {"a.weight", "a.bias", "b.weight", "b.bias"}) {
    ASSERT_TRUE(wm.contains(name)) << name;
    total += m.get(name).nbytes();
  }
  EXPECT_FALSE(wm.contains("tail.w")) << "tied weights are written once";
  EXPECT_EQ(index.at("metadata").at("total_size").as_int(), total);
  std::set<std::string> files;
  for (const auto& [name, file] : wm.items()) {
    files.insert(file.as_string());
    auto f = data::load_safetensors((fs::path(dir) / file.as_string()).string());
    EXPECT_EQ(f.at(name).to_vector<float>(), m.get(name).to_vector<float>()) << name;
    EXPECT_EQ(f.metadata.at("format"), "pt");
  }
  EXPECT_EQ(files.size(), 4u);
  EXPECT_TRUE(files.count("model-00001-of-00004.safetensors"));
  // Under the limit: one model.safetensors, no index.
  const std::string one = fresh_ckpt_dir("save_model_one");
  acc.save_model(m, one);
  EXPECT_TRUE(fs::exists(one + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(one + "/model.safetensors.index.json"));
  EXPECT_EQ(data::load_safetensors(one + "/model.safetensors").tensors.size(), 4u);
  // accelerator.save(state_dict, path)
  acc.save(m.state_dict(), one + "/sub/state.safetensors");
  EXPECT_EQ(data::load_safetensors(one + "/sub/state.safetensors").tensors.size(), 4u);
}
