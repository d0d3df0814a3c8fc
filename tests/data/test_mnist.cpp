// MNIST / Fashion-MNIST IDX loading: every malformed-file check, with small gzip files
// crafted here, plus a smoke test on Debian's real Fashion-MNIST files when installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <brisk/brisk.h>

#include <cstdlib>
#include <filesystem>

#include "data/temp_dir.h"

using namespace brisk;
using namespace brisk::data;
using brisk::testing::TempDir;

namespace {

std::string idx(uint8_t type, uint8_t ndims, std::vector<uint32_t> dims, const std::vector<uint8_t>& payload) {
  std::string b = {'\0', '\0', static_cast<char>(type), static_cast<char>(ndims)};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((d >> s) & 0xFF);
  b.append(payload.begin(), payload.end());
  return b;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), (int)bytes.size());
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Three 2x2 images (values 0, 10, ..., 110) and labels {9, 0, 3}.
std::string good_images() {
  std::vector<uint8_t> px;
  for (int i = 0; i < 12; ++i) px.push_back(static_cast<uint8_t>(10 * i));
  return idx(0x08, 3, {3, 2, 2}, px);
}
std::string good_labels() { return idx(0x08, 1, {3}, {9, 0, 3}); }

struct Folder {
  TempDir dir;
  explicit Folder(const std::string& images = good_images(), const std::string& labels = good_labels(),
                  const std::string& prefix = "train") {
    write_gz(dir.file(prefix + "-images-idx3-ubyte.gz"), images);
    write_gz(dir.file(prefix + "-labels-idx1-ubyte.gz"), labels);
  }
};

std::string load_error(const Folder& f) {
  try {
    FashionMNIST ds(Split::Train, f.dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Mnist, LoadsImagesScaledToUnitRangeAndLabelsAsI64) {
  Folder f;
  FashionMNIST ds(Split::Train, f.dir.path());
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.images().sizes(), (Shape{3, 1, 2, 2}));
  EXPECT_EQ(ds.images().dtype(), DType::F32);
  EXPECT_EQ(ds.labels().dtype(), DType::I64);
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 3}));
  auto px = ds.images().to_vector<float>();
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(px[i], 10.0f * i / 255.0f);
  Example e = ds.get(1);
  EXPECT_EQ(e.data.sizes(), (Shape{1, 2, 2}));
  EXPECT_FLOAT_EQ(e.data.to_vector<float>()[0], 40.0f / 255.0f);
  EXPECT_EQ(e.target.item<int64_t>(), 0);
}

TEST(Mnist, TestSplitReadsT10kFiles) {
  Folder f(good_images(), good_labels(), "t10k");
  EXPECT_EQ(FashionMNIST(Split::Test, f.dir.path()).size(), 3);
  EXPECT_THROW(FashionMNIST(Split::Train, f.dir.path()), Error);
}

TEST(Mnist, ReadsUncompressedFilesToo) {
  TempDir dir;
  brisk::testing::write_file(dir.file("train-images-idx3-ubyte"), good_images());
  brisk::testing::write_file(dir.file("train-labels-idx1-ubyte"), good_labels());
  EXPECT_EQ(MNIST(Split::Train, dir.path()).size(), 3);
}

TEST(Mnist, MissingFilesSayHowToGetThem) {
  TempDir dir;
  try {
    FashionMNIST ds(Split::Train, dir.path() + "/nowhere");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("train-images-idx3-ubyte.gz"), std::string::npos) << m;
    EXPECT_NE(m.find("install dataset-fashion-mnist"), std::string::npos) << m;
    EXPECT_NE(m.find("BRISK_FASHION_MNIST_DIR"), std::string::npos) << m;
  }
}

TEST(Mnist, EnvironmentVariableOverridesDefaultFolderAndArgumentOverridesBoth) {
  Folder f;
  const char* old = std::getenv("BRISK_FASHION_MNIST_DIR");
  std::string saved = old ? old : "";
  ::setenv("BRISK_FASHION_MNIST_DIR", f.dir.path().c_str(), 1);
  EXPECT_EQ(FashionMNIST::default_dir(), f.dir.path());
  EXPECT_EQ(FashionMNIST(Split::Train).size(), 3);
  EXPECT_THROW(FashionMNIST(Split::Train, f.dir.path() + "/elsewhere"), Error);
  if (old) ::setenv("BRISK_FASHION_MNIST_DIR", saved.c_str(), 1);
  else ::unsetenv("BRISK_FASHION_MNIST_DIR");
  if (!old) {
    EXPECT_EQ(FashionMNIST::default_dir(), "/usr/share/datasets/fashion-mnist");
  }
}

TEST(Mnist, RejectsBadMagic) {
  std::string img = good_images();
  img[0] = 0x01;
  std::string m = load_error(Folder(img));
  EXPECT_NE(m.find("bad IDX magic 0x01 0x00"), std::string::npos) << m;
  EXPECT_NE(m.find("train-images-idx3-ubyte.gz"), std::string::npos) << m;
}

TEST(Mnist, RejectsTypeByteOtherThanUnsignedBytes) {
  std::string m = load_error(Folder(idx(0x0d, 3, {3, 2, 2}, std::vector<uint8_t>(48)), good_labels()));
  EXPECT_NE(m.find("type byte 0x0d, expected 0x08"), std::string::npos) << m;
}

TEST(Mnist, RejectsWrongDimensionCount) {
  std::string m = load_error(Folder(idx(0x08, 1, {12}, std::vector<uint8_t>(12)), good_labels()));
  EXPECT_NE(m.find("has 1 dims, expected 3 (images)"), std::string::npos) << m;
  m = load_error(Folder(good_images(), idx(0x08, 3, {3, 1, 1}, {1, 2, 3})));
  EXPECT_NE(m.find("train-labels-idx1-ubyte.gz has 3 dims, expected 1 (labels)"), std::string::npos) << m;
}

TEST(Mnist, RejectsTruncatedHeader) {
  std::string m = load_error(Folder(std::string("\0\0", 2), good_labels()));
  EXPECT_NE(m.find("is 2 bytes, too short for an IDX header"), std::string::npos) << m;
  m = load_error(Folder(good_images().substr(0, 10), good_labels()));
  EXPECT_NE(m.find("too short for its 16-byte IDX header"), std::string::npos) << m;
}

TEST(Mnist, RejectsFileSizeThatDisagreesWithDims) {
  std::string m = load_error(Folder(good_images() + "x", good_labels()));
  EXPECT_NE(m.find("has 13 bytes of data after its header but dims [3, 2, 2] need exactly 12"), std::string::npos)
      << m;
  m = load_error(Folder(good_images(), good_labels().substr(0, 10)));
  EXPECT_NE(m.find("train-labels-idx1-ubyte.gz has 2 bytes of data after its header but dims [3] need exactly 3"),
            std::string::npos)
      << m;
}

TEST(Mnist, RejectsImageAndLabelCountsThatDiffer) {
  std::string m = load_error(Folder(good_images(), idx(0x08, 1, {2}, {1, 2})));
  EXPECT_NE(m.find("has 3 images but"), std::string::npos) << m;
  EXPECT_NE(m.find("has 2 labels"), std::string::npos) << m;
}

TEST(Mnist, RejectsLabelsOutsideZeroToNine) {
  std::string m = load_error(Folder(good_images(), idx(0x08, 1, {3}, {1, 10, 2})));
  EXPECT_NE(m.find("has label 10 at index 1, expected 0..9"), std::string::npos) << m;
}

TEST(Mnist, RejectsCorruptGzipStream) {
  Folder f;
  const std::string path = f.dir.file("train-images-idx3-ubyte.gz");
  std::string gz = brisk::testing::read_file(path);
  brisk::testing::write_file(path, gz.substr(0, gz.size() - 6));  // cut the trailer and some data
  std::string m = load_error(f);
  EXPECT_NE(m.find("is not a readable gzip file"), std::string::npos) << m;
}

TEST(Mnist, RealFashionMnistWhenInstalled) {
  const std::string dir = FashionMNIST::default_dir();
  if (!std::filesystem::exists(std::filesystem::path(dir) / "train-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << dir << " (install dataset-fashion-mnist)";
  FashionMNIST train(Split::Train), test(Split::Test);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.images().sizes(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.labels().to_vector<int64_t>()[0], 9);  // ankle boot
  EXPECT_STREQ(FashionMNIST::class_name(9), "Ankle boot");
  auto px = test.images().to_vector<float>();
  EXPECT_GE(*std::min_element(px.begin(), px.end()), 0.0f);
  EXPECT_LE(*std::max_element(px.begin(), px.end()), 1.0f);
}

TEST(Mnist, FeedsADataLoaderAsInTheReadme) {
  Folder f;
  DataLoader loader(FashionMNIST(Split::Train, f.dir.path()), {.batch_size = 2, .shuffle = true});
  int64_t seen = 0;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.size(1), 1);
    EXPECT_EQ(x.dtype(), DType::F32);
    EXPECT_EQ(y.dtype(), DType::I64);
    seen += y.size(0);
  }
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(loader.size(), 2);
}
