// safetensors as libtorch/Hugging Face users reach for it: look-up by name, iteration in file
// order, memory-mapped loading (no copy of the file), and one-call module save/load with strict
// and non-strict modes.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <fstream>
#include <iterator>

#include "common/bytes.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::le64;
using namespace brisk::data;
using brisk::testing::TempDir;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Tied : nn::Module {
  nn::Embedding wte{5, 3};
  nn::Linear head{3, 5, {.bias = false}};
  nn::LayerNorm ln{Shape{3}};
  Tied() {
    register_modules({{"wte", wte}, {"ln", ln}, {"head", head}});
    head.weight = wte.weight;
    head.set_tensor("weight", wte.weight);
  }
};

}  // namespace

TEST(SafetensorsApi, LooksUpByNameAndIteratesInFileOrder) {
  // The writer orders by dtype (F64 before F32) then name: the file holds z, a, b in that order.
  NamedTensors t = {{"b", tensor<float>({1, 2})}, {"a", tensor<float>({3})}, {"z", tensor<double>({4, 5, 6})}};
  SafetensorsFile f = parse_safetensors(safetensors_bytes(t));
  std::vector<std::string> order;
  for (const auto& [name, x] : f) order.push_back(name);
  EXPECT_EQ(order, (std::vector<std::string>{"z", "a", "b"}));
  EXPECT_EQ(f.size(), 3u);
  EXPECT_TRUE(f.contains("a"));
  EXPECT_FALSE(f.contains("c"));
  ASSERT_NE(f.find("z"), nullptr);
  EXPECT_EQ(f.find("z")->to_vector<double>(), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.at("b").to_vector<float>(), (std::vector<float>{1, 2}));
  try {
    f.at("missing.weight");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"missing.weight\""), std::string::npos) << e.what();
  }
  // Entries added or removed by hand are still found (and reindex() makes it constant time again).
  f.tensors.emplace_back("c", tensor<float>({9}));
  EXPECT_TRUE(f.contains("c"));
  f.tensors.erase(f.tensors.begin());
  EXPECT_FALSE(f.contains("z"));
  EXPECT_EQ(f.at("c").to_vector<float>(), (std::vector<float>{9}));
  f.reindex();
  EXPECT_TRUE(f.contains("a") && f.contains("b") && f.contains("c") && !f.contains("z"));
}

TEST(SafetensorsApi, LoadingMapsTheFileInsteadOfCopyingIt) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  const int64_t n = 1 << 20;  // 4 MiB of f32
  Tensor big = arange(0.0, static_cast<double>(n), 1.0, {.dtype = DType::F32});
  save_safetensors(path, {{"big", big}, {"small", tensor<double>({1.5, 2.5})}});
  const std::string before = read_all(path);

  Tensor kept;
  {
    SafetensorsFile f = load_safetensors(path);
    const Tensor& t = f.at("big");
    // The bytes are the file's pages, not a block of the CPU allocator.
    EXPECT_NE(t.storage()->allocator(), cpu_allocator());
    EXPECT_EQ(t.storage()->nbytes(), static_cast<size_t>(n) * 4);
    EXPECT_EQ(t.to_vector<float>()[12345], 12345.0f);
    EXPECT_EQ(f.at("small").to_vector<double>(), (std::vector<double>{1.5, 2.5}));
    kept = t;
  }
  // The tensor outlives the file object (the mapping lives as long as its tensors) and can be
  // written: copy-on-write, the file stays as it was.
  {
    NoGradGuard ng;
    fill_(kept, -1.0);
  }
  EXPECT_EQ(kept.to_vector<float>()[7], -1.0f);
  EXPECT_EQ(read_all(path), before);
  EXPECT_EQ(load_safetensors(path).at("big").to_vector<float>()[7], 7.0f);
  kept = Tensor();
  // Loading again and again reuses the idle mapping helpers (nothing piles up).
  for (int i = 0; i < 20; ++i) EXPECT_EQ(load_safetensors(path).at("small").to_vector<double>()[1], 2.5);
}

TEST(SafetensorsApi, MisalignedDataFromOtherWritersIsCopied) {
  // Header of 61 bytes (not a multiple of 8): the F32 data starts at byte 69, misaligned.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}       )";
  ASSERT_EQ(header.size() % 4, 1u);
  std::string bytes = le64(header.size()) + header;
  const float v[2] = {3.5f, -2.0f};
  bytes.append(reinterpret_cast<const char*>(v), sizeof v);
  TempDir dir;
  const std::string path = dir.file("odd.safetensors");
  brisk::testing::write_file(path, bytes);
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.at("x").storage()->allocator(), cpu_allocator());
  EXPECT_EQ(f.at("x").to_vector<float>(), (std::vector<float>{3.5f, -2.0f}));
}

TEST(SafetensorsApi, ModuleSaveAndLoadInOneCall) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  manual_seed(1);
  Tied a;
  save_safetensors(path, a, {{"format", "pt"}});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_FALSE(f.contains("head.weight"));  // tied: saved once, under its first name
  manual_seed(2);
  Tied b;
  nn::LoadResult r = load_safetensors_into(b, path);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_EQ(b.wte.weight.to_vector<float>(), a.wte.weight.to_vector<float>());
  EXPECT_TRUE(b.head.weight.is_same(b.wte.weight));
  EXPECT_EQ(b.ln.weight.to_vector<float>(), a.ln.weight.to_vector<float>());
}

TEST(SafetensorsApi, StrictLoadingNamesEveryProblemAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.file("other.safetensors");
  save_safetensors(path, {{"wte.weight", zeros({5, 4})}, {"ln.weight", ones({3})}, {"extra.bias", ones({2})}});
  manual_seed(3);
  Tied m;
  const std::vector<float> ln_before = m.ln.bias.to_vector<float>(), wte_before = m.wte.weight.to_vector<float>();
  try {
    load_safetensors_into(m, path);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("ln.bias"), std::string::npos) << msg;     // missing
    EXPECT_NE(msg.find("extra.bias"), std::string::npos) << msg;  // unexpected
    EXPECT_NE(msg.find("wte.weight"), std::string::npos) << msg;  // shape mismatch
  }
  EXPECT_EQ(m.wte.weight.to_vector<float>(), wte_before);
  EXPECT_EQ(m.ln.bias.to_vector<float>(), ln_before);
  // Non-strict: what matches is loaded, the rest reported.
  nn::LoadResult r = load_safetensors_into(m, path, /*strict=*/false);
  EXPECT_EQ(m.ln.weight.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra.bias"}));
  EXPECT_NE(std::find(r.missing_keys.begin(), r.missing_keys.end(), "ln.bias"), r.missing_keys.end());
  ASSERT_EQ(r.shape_mismatches.size(), 1u);
  EXPECT_NE(r.shape_mismatches[0].find("wte.weight"), std::string::npos);
  EXPECT_EQ(m.wte.weight.to_vector<float>(), wte_before);
}
