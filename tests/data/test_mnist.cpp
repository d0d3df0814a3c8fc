// MNIST / Fashion-MNIST IDX loading: every malformed-file check, with small gzip files
// crafted here, plus a smoke test on Debian's real Fashion-MNIST files when installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <brisk/brisk.h>

#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>

#include "common/rss.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::peak_rss_mib;
using namespace brisk::data;
using brisk::testing::TempDir;

namespace {

std::string idx(uint8_t type, uint8_t ndims, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
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
  px.reserve(12);
  for (int i = 0; i < 12; ++i) px.push_back(static_cast<uint8_t>(10 * i));
  return idx(0x08, 3, {3, 2, 2}, px);
}
std::string good_labels() {
  return idx(0x08, 1, {3}, {9, 0, 3});
}

// One gzip member holding `bytes`.
std::string gzip(const std::string& bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, bytes.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string parse_error(const std::string& bytes, int dims, uint64_t max_payload = kMaxIdxPayload) {
  try {
    parse_idx(bytes, dims, "mem.idx", "read_idx", max_payload);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

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
  if (old)
    ::setenv("BRISK_FASHION_MNIST_DIR", saved.c_str(), 1);
  else
    ::unsetenv("BRISK_FASHION_MNIST_DIR");
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
  EXPECT_NE(m.find("has more data after its header than the 12 bytes its dims [3, 2, 2] need"), std::string::npos) << m;
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

// No image, so no byte is needed, but (0, 1, 2^32-1, 2^32-1) f32 images have strides past int64.
TEST(Mnist, RejectsZeroImagesOfHugeSize) {
  std::string m = load_error(Folder(idx(0x08, 3, {0, 0xFFFFFFFF, 0xFFFFFFFF}, {}), idx(0x08, 1, {0}, {})));
  EXPECT_NE(m.find("train-images-idx3-ubyte.gz dims: shape [0, 4294967295, 4294967295] is too large"),
            std::string::npos)
      << m;
  m = load_error(Folder(idx(0x08, 3, {0, 0x7FFFFFFF, 0x7FFFFFFF}, {}), idx(0x08, 1, {0}, {})));
  EXPECT_NE(m.find("is too large"), std::string::npos) << m;
}

// A 1-image 1x1 header followed by 256 gzip members of 1 MiB of zeros each (a ~260 KB file):
// only the header and the one declared byte may be inflated, never the 256 MiB behind them.
TEST(Mnist, GzipDataIsInflatedOnlyAsFarAsTheHeaderDeclares) {
  std::string bomb = gzip(idx(0x08, 3, {1, 1, 1}, {7}));
  const std::string zeros = gzip(std::string(size_t{1} << 20, '\0'));
  for (int i = 0; i < 256; ++i) bomb += zeros;
  const long before = peak_rss_mib();
  std::string m = parse_error(bomb, 3);
  EXPECT_NE(m.find("mem.idx has more data after its header than the 1 bytes its dims [1, 1, 1] need"),
            std::string::npos)
      << m;
  TempDir dir;
  brisk::testing::write_file(dir.file("bomb.gz"), bomb);
  try {
    read_idx(dir.file("bomb.gz"), 3);
    ADD_FAILURE() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bomb.gz has more data after its header"), std::string::npos) << e.what();
  }
  EXPECT_LT(peak_rss_mib() - before, 64) << "inflated far past the declared payload";
}

TEST(Mnist, TrailingBytesAfterTheGzipDataAreAnError) {
  const std::string gz = gzip(good_images());
  EXPECT_EQ(parse_idx(gz, 3).bytes.size(), 12u);
  std::string m = parse_error(gz + "junk", 3);
  EXPECT_NE(m.find("mem.idx has trailing bytes after its gzip data"), std::string::npos) << m;
  m = parse_error(gz + std::string(1, '\0'), 3);
  EXPECT_NE(m.find("trailing bytes after its gzip data"), std::string::npos) << m;
  Folder f;
  const std::string path = f.dir.file("train-images-idx3-ubyte.gz");
  brisk::testing::write_file(path, gz + "junk");
  m = load_error(f);
  EXPECT_NE(m.find("train-images-idx3-ubyte.gz has trailing bytes after its gzip data"), std::string::npos) << m;
}

TEST(Mnist, ReadsConcatenatedGzipMembersAsOneStream) {
  const std::string raw = good_images();
  IdxData d = parse_idx(gzip(raw.substr(0, 7)) + gzip(raw.substr(7)), 3);
  EXPECT_EQ(d.dims, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(d.bytes.size(), 12u);
  EXPECT_EQ(d.bytes[11], 110);
}

TEST(Mnist, InMemoryAndFileReadersAgreeOnPlainAndGzipData) {
  TempDir dir;
  brisk::testing::write_file(dir.file("plain"), good_labels());
  brisk::testing::write_file(dir.file("packed.gz"), gzip(good_labels()));
  for (const std::string& bytes : {good_labels(), gzip(good_labels())}) {
    IdxData d = parse_idx(bytes, 1);
    EXPECT_EQ(d.dims, std::vector<int64_t>{3});
    EXPECT_EQ(d.bytes, (std::vector<uint8_t>{9, 0, 3}));
  }
  EXPECT_EQ(read_idx(dir.file("plain"), 1).bytes, (std::vector<uint8_t>{9, 0, 3}));
  EXPECT_EQ(read_idx(dir.file("packed.gz"), 1).bytes, (std::vector<uint8_t>{9, 0, 3}));
}

TEST(Mnist, RejectsTruncatedGzipAndPayloadsOverTheLimit) {
  const std::string gz = gzip(good_images());
  for (size_t cut : {size_t{3}, size_t{12}, gz.size() / 2, gz.size() - 1}) {
    std::string m = parse_error(gz.substr(0, cut), 3);
    EXPECT_NE(m.find("mem.idx"), std::string::npos) << m;
    EXPECT_EQ(m.find("no error"), std::string::npos) << "cut at " << cut;
  }
  std::string m = parse_error(gz.substr(0, gz.size() - 4), 3);  // the length field of the trailer
  EXPECT_NE(m.find("is not a readable gzip file"), std::string::npos) << m;
  m = parse_error(good_images(), 3, 11);
  EXPECT_NE(m.find("declares dims [3, 2, 2] (12 bytes), more than the limit of 11 bytes"), std::string::npos) << m;
  // A header claiming 2^32-1 labels with 3 bytes behind it: rejected without allocating the claim.
  m = parse_error(idx(0x08, 1, {0xFFFFFFFF}, {1, 2, 3}), 1);
  EXPECT_NE(m.find("has 3 bytes of data after its header but dims [4294967295] need exactly 4294967295"),
            std::string::npos)
      << m;
}
