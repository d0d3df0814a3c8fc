// Saves written in the background (async_save, docs/checkpoints.md "Saving in the background"):
// the files hold the state at the moment of save_state whatever the loop does next, they are the
// bytes of a synchronous save, and the next save, a load, wait_for_save and the destructor wait for
// them; a failed background write is an error at the next wait, naming the file.
#include <signal.h>
#include <sys/resource.h>

#include "accelerate/checkpoint_util.h"

using namespace brisk;
using namespace brisk::testing;

namespace {

AcceleratorOptions options(bool async, const std::string& project = "") {
  AcceleratorOptions o{.gradient_accumulation_steps = 2, .seed = 4, .async_save = async};
  if (!project.empty()) {
    o.project_dir = project;
    o.automatic_checkpoint_naming = true;
    o.total_limit = 2;
  }
  return o;
}

std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = slurp(e.path());
  return out;
}

void zero_parameters(nn::Module& net) {
  NoGradGuard g;
  for (const Tensor& p : net.parameters()) p.fill_(0.0);
}

// Caps the size of any file this process writes (a full disk) while alive; writes past it fail
// with EFBIG instead of killing the process.
struct FileSizeLimit {
  struct rlimit old {};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old);
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit rl = {bytes, old.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &rl);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
};

}  // namespace

// (One trainer at a time: they share the default generator, which each constructor seeds and
// each load restores.)
TEST(CheckpointAsync, TheFilesHoldTheStateAtSaveStateWhateverTheLoopDoesNext) {
  const fs::path root = fresh_folder("async_bytes");
  {
    CkptTrainer sync(options(false));
    sync.run(5);
    sync.acc.save_state((root / "sync").string());
  }
  {
    CkptTrainer async(options(true));
    async.run(5);
    async.acc.save_state((root / "async").string());
    // The loop goes on at once: the parameters change (here: all zeros) while the files are written.
    zero_parameters(async.net);
    async.run(3);
    async.acc.wait_for_save();
  }
  EXPECT_TRUE(accelerate::is_complete_checkpoint((root / "async").string()));
  // The same bytes as the synchronous save of the same state, manifest included.
  const auto a = files_of(root / "async"), s = files_of(root / "sync");
  ASSERT_EQ(a.size(), s.size());
  for (const auto& [name, bytes] : s) EXPECT_TRUE(a.count(name) && a.at(name) == bytes) << name << " differs";
  // And it resumes as the synchronous one does.
  std::vector<float> after[2];
  for (int i = 0; i < 2; ++i) {
    CkptTrainer t(options(false));
    t.acc.load_state((root / (i == 0 ? "async" : "sync")).string());
    t.run(6);
    after[i] = flat_params(t.net);
  }
  EXPECT_EQ(after[0], after[1]);
}

TEST(CheckpointAsync, SavesInQuickSuccessionAreNumberedInOrderAndKeepTotalLimit) {
  const fs::path project = fresh_folder("async_auto");
  std::vector<std::vector<float>> params;
  {
    CkptTrainer t(options(true, project.string()));
    for (int i = 0; i < 4; ++i) {
      t.run(2);
      EXPECT_EQ(t.acc.save_state(), project.string() + "/checkpoints/checkpoint_" + std::to_string(i));
      params.push_back(flat_params(t.net));
    }
  }  // the destructor waits for the last save
  EXPECT_FALSE(fs::exists(project / "checkpoints/checkpoint_0"));
  EXPECT_FALSE(fs::exists(project / "checkpoints/checkpoint_1"));
  for (int i : {2, 3}) {
    const fs::path dir = project / ("checkpoints/checkpoint_" + std::to_string(i));
    std::string why;
    EXPECT_TRUE(accelerate::is_complete_checkpoint(dir.string(), &why)) << why;
    CkptTrainer t(options(false));
    t.acc.load_state(dir.string());
    EXPECT_EQ(flat_params(t.net), params[static_cast<size_t>(i)]) << dir;
  }
  for (const auto& e : fs::recursive_directory_iterator(project))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << "left behind: " << e.path();
}

TEST(CheckpointAsync, LoadStateAndNewestCheckpointWaitForTheSaveInFlight) {
  const fs::path project = fresh_folder("async_load");
  CkptTrainer t(options(true, project.string()));
  t.run(3);
  const std::vector<float> saved = flat_params(t.net);
  const std::string dir = t.acc.save_state();
  zero_parameters(t.net);
  EXPECT_EQ(t.acc.newest_checkpoint(), dir);
  EXPECT_EQ(t.acc.load_state(), dir);
  EXPECT_EQ(flat_params(t.net), saved);
}

// A full disk during the background write: the error comes at the next wait, names the file and
// says why; the previous checkpoint stays the newest complete one and nothing partial is left.
TEST(CheckpointAsync, AFailedBackgroundWriteIsAnErrorAtTheNextWaitNamingTheFile) {
  const fs::path project = fresh_folder("async_full");
  CkptTrainer t(options(true, project.string()));
  t.run(2);
  const std::string first = t.acc.save_state();
  t.acc.wait_for_save();
  t.run(2);
  for (bool by_next_save : {false, true}) {
    {
      FileSizeLimit limit(100);  // rank_0.json, the first file, is ~200 bytes
      t.acc.save_state();        // returns: the write fails on the background thread
      try {
        if (by_next_save)
          t.acc.save_state();
        else
          t.acc.wait_for_save();
        ADD_FAILURE() << "no error from the failed background write";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("Accelerator::save_state: writing '"), std::string::npos) << m;
        EXPECT_NE(m.find("rank_0.json"), std::string::npos) << m;
        EXPECT_NE(m.find("the disk is full or a file size limit was reached"), std::string::npos) << m;
      }
    }
    EXPECT_EQ(t.acc.newest_checkpoint(), first);
    for (const auto& e : fs::recursive_directory_iterator(project))
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << "left behind: " << e.path();
  }
  // Once there is room again, saving works.
  const std::string next = t.acc.save_state();
  t.acc.wait_for_save();
  EXPECT_TRUE(accelerate::is_complete_checkpoint(next));
}

TEST(CheckpointAsync, TheOptionComesFromTheProgramOrBriskAsyncSave) {
  auto env = [](const char* name) -> const char* { return std::string(name) == "BRISK_ASYNC_SAVE" ? "1" : nullptr; };
  const AcceleratorSettings from_env = resolve_accelerator_options({}, env);
  EXPECT_TRUE(from_env.async_save);
  EXPECT_EQ(from_env.source.at("async_save"), "env BRISK_ASYNC_SAVE");
  EXPECT_FALSE(resolve_accelerator_options({.async_save = false}, env).async_save);
  EXPECT_FALSE(resolve_accelerator_options({}, [](const char*) -> const char* { return nullptr; }).async_save);
}
