// Model folders' weights (data::load/save_safetensors_folder): one file or shards with the index,
// written deterministically, earlier saves' weight files removed; an index may only name files in
// the folder (no paths, no escaping links, except the Hugging Face cache's blobs), every shard must
// exist and agree with it; pickled weights are refused without being opened.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <filesystem>

#include "common/errors.h"
#include "data/temp_dir.h"

using namespace brisk;
using namespace brisk::data;
using brisk::testing::error_of;
using brisk::testing::expect_error;
using brisk::testing::read_file;
using brisk::testing::TempDir;
using brisk::testing::write_file;
namespace fs = std::filesystem;

namespace {

// Five tensors of 400 bytes each (f32, 10 x 10), named a ... e, values distinct per tensor.
NamedTensors five() {
  NamedTensors t;
  for (int i = 0; i < 5; ++i)
    t.emplace_back(std::string(1, static_cast<char>('a' + i)),
                   arange(0.0, 100.0, 1.0, {.dtype = DType::F32}).reshape({10, 10}) + i);
  return t;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<float>() == b.to_vector<float>();
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A folder of two shards (a, b | c) with its index, written by hand so each test can break one thing.
void two_shards(const std::string& dir, const std::string& second_name = "model-00002-of-00002.safetensors") {
  NamedTensors t = five();
  save_safetensors(dir + "/model-00001-of-00002.safetensors", {t[0], t[1]});
  save_safetensors(dir + "/" + second_name, {t[2]});
  write_file(dir + "/model.safetensors.index.json",
             "{\"metadata\": {\"total_size\": 1200}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
             "\"b\": \"model-00001-of-00002.safetensors\", \"c\": \"" +
                 second_name + "\"}}");
}

}  // namespace

TEST(SafetensorsFolder, SmallWeightsGoToOneModelSafetensors) {
  TempDir dir;
  const auto written = save_safetensors_folder(dir.path() + "/m", five());
  EXPECT_EQ(written, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(listing(dir.path() + "/m"), std::vector<std::string>{"model.safetensors"});
  SafetensorsFolder f = load_safetensors_folder(dir.path() + "/m");
  EXPECT_FALSE(f.sharded);
  ASSERT_EQ(f.tensors.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(same_values(f.tensors[i].second, five()[i].second));
}

TEST(SafetensorsFolder, ShardsAboveTheLimitWithTransformersIndex) {
  TempDir dir;
  const std::string m = dir.path() + "/m";
  const auto written = save_safetensors_folder(m, five(), {.max_shard_size = 800});  // two tensors a shard
  EXPECT_EQ(written, (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                               "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  const json::Value index = json::parse(read_file(m + "/model.safetensors.index.json"));
  EXPECT_EQ(index.at("metadata").at("total_size").as_int(), 2000);
  EXPECT_EQ(index.at("weight_map").at("c").as_string(), "model-00002-of-00003.safetensors");
  EXPECT_EQ(index.at("weight_map").at("e").as_string(), "model-00003-of-00003.safetensors");
  SafetensorsFolder f = load_safetensors_folder(m);
  EXPECT_TRUE(f.sharded);
  EXPECT_EQ(f.files.size(), 3u);
  ASSERT_EQ(f.tensors.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(f.tensors[i].first, five()[i].first);
    EXPECT_TRUE(same_values(f.tensors[i].second, five()[i].second));
  }
  // The same tensors give the same bytes, file for file.
  save_safetensors_folder(dir.path() + "/again", five(), {.max_shard_size = 800});
  for (const std::string& name : written)
    EXPECT_EQ(read_file(m + "/" + name), read_file(dir.path() + "/again/" + name));
}

TEST(SafetensorsFolder, SavingAgainRemovesTheEarlierSavesWeightFilesOnly) {
  TempDir dir;
  const std::string m = dir.path() + "/m";
  save_safetensors_folder(m, five(), {.max_shard_size = 800});
  write_file(m + "/config.json", "{}");
  write_file(m + "/model-notes.txt", "kept");
  save_safetensors_folder(m, five());  // now one file: the shards and the index must go
  EXPECT_EQ(listing(m), (std::vector<std::string>{"config.json", "model-notes.txt", "model.safetensors"}));
  save_safetensors_folder(m, five(), {.max_shard_size = 1200});  // and back: the single file must go
  EXPECT_EQ(listing(m), (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                                  "model-00002-of-00002.safetensors", "model-notes.txt",
                                                  "model.safetensors.index.json"}));
  EXPECT_EQ(load_safetensors_folder(m).tensors.size(), 5u);
}

TEST(SafetensorsFolder, IndexNamingAFileOutsideTheFolderIsRefused) {
  TempDir dir;
  write_file(dir.path() + "/outside.safetensors", safetensors_bytes({five()[2]}));
  fs::create_directory(dir.path() + "/m");
  const std::string m = dir.path() + "/m";
  for (const std::string& name : {std::string("../outside.safetensors"), dir.path() + "/outside.safetensors",
                                  std::string("sub/x.safetensors"), std::string("..")}) {
    two_shards(m);
    json::Value index = json::parse(read_file(m + "/model.safetensors.index.json"));
    index["weight_map"].set("c", name);
    write_file(m + "/model.safetensors.index.json", index.dump());
    const std::string e = error_of([&] { load_safetensors_folder(m); });
    EXPECT_NE(e.find("not a file name in the folder"), std::string::npos) << name << ": " << e;
    EXPECT_NE(e.find(name), std::string::npos) << e;
  }
}

TEST(SafetensorsFolder, ShardLinkedOutsideTheFolderIsRefusedInsideIsRead) {
  TempDir dir;
  const std::string m = dir.path() + "/m";
  fs::create_directory(m);
  two_shards(m);
  // A link to a copy outside: refused, naming the target.
  fs::rename(m + "/model-00002-of-00002.safetensors", dir.path() + "/elsewhere.safetensors");
  fs::create_symlink(dir.path() + "/elsewhere.safetensors", m + "/model-00002-of-00002.safetensors");
  const std::string e = error_of([&] { load_safetensors_folder(m); });
  EXPECT_NE(e.find("outside the folder"), std::string::npos) << e;
  EXPECT_NE(e.find("elsewhere.safetensors"), std::string::npos) << e;
  // A link to a file inside the folder: read.
  fs::remove(m + "/model-00002-of-00002.safetensors");
  fs::rename(dir.path() + "/elsewhere.safetensors", m + "/real.bin.safetensors");
  fs::create_symlink("real.bin.safetensors", m + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(load_safetensors_folder(m).tensors.size(), 3u);
}

TEST(SafetensorsFolder, HuggingFaceCacheLinksIntoItsBlobsAreRead) {
  // ~/.cache/huggingface/hub/models--org--name/snapshots/<revision>/<file> -> ../../blobs/<hash>
  TempDir dir;
  const std::string entry = dir.path() + "/models--org--name", snap = entry + "/snapshots/0123abcd";
  fs::create_directories(entry + "/blobs");
  fs::create_directories(snap);
  two_shards(snap);
  for (const char* name : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    const std::string blob = std::string("blob_") + name;
    fs::rename(snap + "/" + name, entry + "/blobs/" + blob);
    fs::create_symlink("../../blobs/" + blob, snap + "/" + name);
  }
  EXPECT_EQ(load_safetensors_folder(snap).tensors.size(), 3u);
  // The same links from a folder that is not a snapshot of that entry: refused.
  fs::create_directories(dir.path() + "/other/x");
  two_shards(dir.path() + "/other/x");
  fs::remove(dir.path() + "/other/x/model-00002-of-00002.safetensors");
  fs::create_symlink(entry + "/blobs/blob_model-00002-of-00002.safetensors",
                     dir.path() + "/other/x/model-00002-of-00002.safetensors");
  expect_error([&] { load_safetensors_folder(dir.path() + "/other/x"); }, "outside the folder");
}

TEST(SafetensorsFolder, MissingShardIsNamed) {
  TempDir dir;
  two_shards(dir.path());
  fs::remove(dir.path() + "/model-00002-of-00002.safetensors");
  const std::string e = error_of([&] { load_safetensors_folder(dir.path()); });
  EXPECT_NE(e.find("model-00002-of-00002.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST(SafetensorsFolder, IndexAndShardsMustAgree) {
  TempDir dir;
  two_shards(dir.path());
  json::Value index = json::parse(read_file(dir.path() + "/model.safetensors.index.json"));
  index["weight_map"].set("b", "model-00002-of-00002.safetensors");  // b is in the first shard
  write_file(dir.path() + "/model.safetensors.index.json", index.dump());
  expect_error([&] { load_safetensors_folder(dir.path()); }, "the index and the shards disagree");
  index["weight_map"].set("b", "model-00001-of-00002.safetensors");
  index["weight_map"].set("z", "model-00001-of-00002.safetensors");  // listed, absent
  write_file(dir.path() + "/model.safetensors.index.json", index.dump());
  expect_error([&] { load_safetensors_folder(dir.path()); }, "which does not hold it");
  write_file(dir.path() + "/model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
  expect_error([&] { load_safetensors_folder(dir.path()); }, "weight_map[\"a\"] must be a file name");
  write_file(dir.path() + "/model.safetensors.index.json", "{\"metadata\": {}}");
  expect_error([&] { load_safetensors_folder(dir.path()); }, "has no \"weight_map\"");
  write_file(dir.path() + "/model.safetensors.index.json", "{\"weight_map\": ");
  expect_error([&] { load_safetensors_folder(dir.path()); }, "is not valid JSON");
}

TEST(SafetensorsFolder, PickledWeightsAreRefusedUnopenedWithTheWayToConvert) {
  for (const std::string name : {"pytorch_model.bin", "model.pt", "last.ckpt", "weights.pth"}) {
    TempDir dir;
    write_file(dir.path() + "/config.json", "{}");
    // A dangling link: any attempt to open it would fail with another message.
    fs::create_symlink(dir.path() + "/nowhere", dir.path() + "/" + name);
    const std::string e = error_of([&] { load_safetensors_folder(dir.path()); });
    EXPECT_NE(e.find(name), std::string::npos) << e;
    EXPECT_NE(e.find("never opens"), std::string::npos) << e;
    EXPECT_NE(e.find("runs whatever code"), std::string::npos) << e;
    EXPECT_NE(e.find("safe_serialization=True"), std::string::npos) << e;
  }
  TempDir empty;
  expect_error([&] { load_safetensors_folder(empty.path()); }, "has no model.safetensors");
  expect_error([&] { load_safetensors_folder(empty.path() + "/absent"); }, "is not a folder");
}

TEST(SafetensorsFolder, PickleBesideSafetensorsIsLeftAlone) {
  TempDir dir;
  save_safetensors_folder(dir.path(), five());
  write_file(dir.path() + "/pytorch_model.bin", "\x80\x04 not read");
  EXPECT_EQ(load_safetensors_folder(dir.path()).tensors.size(), 5u);
}

TEST(SafetensorsFolder, DuplicateNamesAreRefusedBeforeWriting) {
  TempDir dir;
  NamedTensors t = five();
  t.push_back(t[0]);
  expect_error([&] { save_safetensors_folder(dir.path() + "/m", t); }, "\"a\" appears twice");
  EXPECT_FALSE(fs::exists(dir.path() + "/m/model.safetensors"));
}
