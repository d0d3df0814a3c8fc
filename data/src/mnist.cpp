// IDX reading through zlib's gzread (which also reads uncompressed files) and the
// MNIST/Fashion-MNIST datasets built on it.
#include "brisk/data/mnist.h"

#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace brisk::data {

namespace {

std::string hex_byte(uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

// The whole decompressed content of `path`.
std::vector<uint8_t> read_gz(const std::string& path, const std::string& who, const std::string& fix) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    BRISK_THROW(who, ": cannot open ", path, " (", err ? std::strerror(err) : "out of memory", ")",
                fix.empty() ? "" : "; ", fix);
  }
  std::vector<uint8_t> out;
  constexpr unsigned kChunk = 1u << 20;
  for (;;) {
    const size_t at = out.size();
    out.resize(at + kChunk);
    const int n = gzread(f, out.data() + at, kChunk);
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      BRISK_THROW(who, ": ", path, " is not a readable gzip file: ", msg);
    }
    out.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
  }
  int code = 0;
  std::string msg = gzerror(f, &code);
  gzclose(f);
  BRISK_CHECK(code == Z_OK, who, ": ", path, " is not a readable gzip file: ", msg);
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

IdxData parse_idx(std::vector<uint8_t> raw, const std::string& path, int expected_dims, const std::string& who) {
  BRISK_CHECK(raw.size() >= 4, who, ": ", path, " is ", raw.size(), " bytes, too short for an IDX header (4 bytes)");
  BRISK_CHECK(raw[0] == 0 && raw[1] == 0, who, ": ", path, " has bad IDX magic ", hex_byte(raw[0]), " ",
              hex_byte(raw[1]), " (expected 0x00 0x00); is it an IDX file?");
  BRISK_CHECK(raw[2] == 0x08, who, ": ", path, " has IDX type byte ", hex_byte(raw[2]),
              ", expected 0x08 (unsigned bytes)");
  BRISK_CHECK(raw[3] == expected_dims, who, ": ", path, " has ", int{raw[3]}, " dims, expected ", expected_dims,
              expected_dims == 1 ? " (labels)" : " (images)");
  const size_t header = 4 + 4 * static_cast<size_t>(expected_dims);
  BRISK_CHECK(raw.size() >= header, who, ": ", path, " is ", raw.size(), " bytes, too short for its ", header,
              "-byte IDX header");
  IdxData out;
  uint64_t payload = 1;
  for (int d = 0; d < expected_dims; ++d) {
    const uint32_t v = be32(raw.data() + 4 + 4 * d);
    out.dims.push_back(v);
    constexpr uint64_t kLimit = uint64_t{1} << 40;  // far beyond any IDX file; keeps the product exact
    BRISK_CHECK(v == 0 || payload <= kLimit / v, who, ": ", path, " declares dims ", out.dims, ", implausibly large");
    payload *= v;
  }
  BRISK_CHECK(raw.size() - header == payload, who, ": ", path, " has ", raw.size() - header,
              " bytes of data after its header but dims ", out.dims, " need exactly ", payload);
  raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(header));
  out.bytes = std::move(raw);
  return out;
}

std::string env_or(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

// `<dir>/<name>.gz`, or `<dir>/<name>` when only the uncompressed file exists.
std::string idx_path(const std::string& dir, const std::string& name) {
  const std::filesystem::path gz = std::filesystem::path(dir) / (name + ".gz");
  const std::filesystem::path plain = std::filesystem::path(dir) / name;
  std::error_code ec;
  if (!std::filesystem::exists(gz, ec) && std::filesystem::exists(plain, ec)) return plain.string();
  return gz.string();
}

}  // namespace

IdxData read_idx(const std::string& path, int expected_dims, const std::string& who) {
  BRISK_CHECK(expected_dims == 1 || expected_dims == 3, who, ": expected_dims must be 1 or 3, got ", expected_dims);
  return parse_idx(read_gz(path, who, ""), path, expected_dims, who);
}

std::pair<Tensor, Tensor> MNIST::load(Split split, const Source& src) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string img_path = idx_path(src.dir, prefix + "-images-idx3-ubyte");
  const std::string lbl_path = idx_path(src.dir, prefix + "-labels-idx1-ubyte");
  IdxData img = parse_idx(read_gz(img_path, src.name, src.fix), img_path, 3, src.name);
  IdxData lbl = parse_idx(read_gz(lbl_path, src.name, src.fix), lbl_path, 1, src.name);
  BRISK_CHECK(img.dims[0] == lbl.dims[0], src.name, ": ", img_path, " has ", img.dims[0], " images but ", lbl_path,
              " has ", lbl.dims[0], " labels");
  const int64_t n = img.dims[0], rows = img.dims[1], cols = img.dims[2];
  Tensor labels = empty({n}, DType::I64);
  int64_t* lp = labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    BRISK_CHECK(lbl.bytes[i] < 10, src.name, ": ", lbl_path, " has label ", int{lbl.bytes[i]}, " at index ", i,
                ", expected 0..9");
    lp[i] = lbl.bytes[i];
  }
  Tensor images = empty({n, 1, rows, cols}, DType::F32);
  float* ip = images.data<float>();
  const size_t total = img.bytes.size();
  for (size_t i = 0; i < total; ++i) ip[i] = static_cast<float>(img.bytes[i]) * (1.0f / 255.0f);
  return {images, labels};
}

MNIST::MNIST(Split split, const std::string& dir, std::pair<Tensor, Tensor> loaded)
    : TensorDataset(std::move(loaded.first), std::move(loaded.second)), dir_(dir), split_(split) {}

MNIST::MNIST(Split split, const Source& source) : MNIST(split, source.dir, load(split, source)) {}

MNIST::MNIST(Split split, const std::string& dir)
    : MNIST(split, Source{"MNIST", dir.empty() ? default_dir() : dir,
                          "put MNIST's four IDX files there, or pass the folder / set BRISK_MNIST_DIR"}) {}

std::string MNIST::default_dir() { return env_or("BRISK_MNIST_DIR", "/usr/share/datasets/mnist"); }

FashionMNIST::FashionMNIST(Split split, const std::string& dir)
    : MNIST(split, Source{"FashionMNIST", dir.empty() ? default_dir() : dir,
                          "install dataset-fashion-mnist or pass --data / set BRISK_FASHION_MNIST_DIR"}) {}

std::string FashionMNIST::default_dir() {
  return env_or("BRISK_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist");
}

const char* FashionMNIST::class_name(int64_t label) {
  static const char* const kNames[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                         "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  BRISK_CHECK(label >= 0 && label < 10, "FashionMNIST::class_name: label ", label, " out of range 0..9");
  return kNames[label];
}

}  // namespace brisk::data
