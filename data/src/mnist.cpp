// IDX reading (plain, or gzip through zlib's inflate, header first and bounded by it) from a
// file or from memory, and the MNIST/Fashion-MNIST datasets built on it.
#include "brisk/data/mnist.h"

#include <zlib.h>

#include "brisk/core/checked_size.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace brisk::data {

namespace {

std::string hex_byte(uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

// The raw bytes of a file, from memory or from disk.
class Source {
 public:
  virtual ~Source() = default;
  // Up to n bytes into buf; 0 only at the end.
  virtual size_t read(uint8_t* buf, size_t n) = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  size_t read(uint8_t* buf, size_t n) override {
    n = std::min(n, bytes_.size() - pos_);
    if (n > 0) std::memcpy(buf, bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

class FileSource : public Source {
 public:
  FileSource(const std::string& path, const std::string& who, const std::string& fix) : path_(path), who_(who) {
    f_ = std::fopen(path.c_str(), "rb");
    if (f_ == nullptr) {
      const int err = errno;
      BRISK_THROW(who, ": cannot open ", path, " (", std::strerror(err), ")", fix.empty() ? "" : "; ", fix);
    }
  }
  ~FileSource() override { std::fclose(f_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  size_t read(uint8_t* buf, size_t n) override {
    const size_t got = std::fread(buf, 1, n, f_);
    if (got < n && std::ferror(f_)) BRISK_THROW(who_, ": reading ", path_, " failed: ", std::strerror(errno));
    return got;
  }

 private:
  std::FILE* f_ = nullptr;
  std::string path_, who_;
};

// The decompressed bytes of a source: gzip (one or more members, nothing after them) when it
// starts with gzip's magic bytes, else the bytes themselves. Reads only as far as asked.
class Decoder {
 public:
  Decoder(Source& src, const std::string& what, const std::string& who) : src_(src), what_(what), who_(who) {
    fill();
    gzip_ = avail() >= 2 && in_[pos_] == 0x1f && in_[pos_ + 1] == 0x8b;
    if (gzip_) {
      if (inflateInit2(&zs_, 15 + 16) != Z_OK) BRISK_THROW(who_, ": ", what_, ": cannot start zlib's inflate");
      inflating_ = true;
    }
  }
  ~Decoder() {
    if (inflating_) inflateEnd(&zs_);
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Up to n decompressed bytes into out; fewer only at the end of the data.
  size_t read(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      if (!gzip_) {
        if (avail() == 0 && !fill()) break;
        const size_t k = std::min(n - got, avail());
        std::memcpy(out + got, in_.data() + pos_, k);
        pos_ += k;
        got += k;
        continue;
      }
      if (member_done_) {
        // After a complete gzip member: the end of the file, or another member.
        if (avail() < 2) fill();
        if (avail() == 0) break;
        if (avail() < 2 || in_[pos_] != 0x1f || in_[pos_ + 1] != 0x8b)
          BRISK_THROW(who_, ": ", what_, " has trailing bytes after its gzip data");
        inflateReset(&zs_);
        member_done_ = false;
      }
      if (avail() == 0) fill();
      zs_.next_in = in_.data() + pos_;
      zs_.avail_in = static_cast<uInt>(avail());
      zs_.next_out = out + got;
      zs_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, size_t{1} << 30));
      // inflate may still hold output from earlier input, so it runs even when no input is left.
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      pos_ = static_cast<size_t>(zs_.next_in - in_.data());
      got = static_cast<size_t>(zs_.next_out - out);
      if (ret == Z_STREAM_END) {
        member_done_ = true;
      } else if (ret == Z_BUF_ERROR) {
        if (avail() == 0 && eof_)
          BRISK_THROW(who_, ": ", what_, " is not a readable gzip file: unexpected end of file (truncated)");
      } else if (ret != Z_OK) {
        BRISK_THROW(who_, ": ", what_, " is not a readable gzip file: ", zs_.msg ? zs_.msg : zError(ret));
      }
    }
    return got;
  }

 private:
  Source& src_;
  const std::string& what_;
  const std::string& who_;
  std::vector<uint8_t> in_ = std::vector<uint8_t>(1 << 16);
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false, gzip_ = false, inflating_ = false, member_done_ = false;
  z_stream zs_{};

  size_t avail() const { return end_ - pos_; }
  // Appends input after what is buffered; false at the end of the source.
  bool fill() {
    if (eof_) return false;
    if (pos_ > 0) {
      std::memmove(in_.data(), in_.data() + pos_, avail());
      end_ -= pos_;
      pos_ = 0;
    }
    const size_t got = src_.read(in_.data() + end_, in_.size() - end_);
    if (got == 0) eof_ = true;
    end_ += got;
    return got > 0;
  }
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Header first, then exactly the payload it declares, then the end of the data.
IdxData decode_idx(Decoder& in, const std::string& path, int expected_dims, const std::string& who,
                   uint64_t max_payload) {
  BRISK_CHECK(expected_dims == 1 || expected_dims == 3, who, ": expected_dims must be 1 or 3, got ", expected_dims);
  uint8_t head[16];
  const size_t header = 4 + 4 * static_cast<size_t>(expected_dims);
  size_t got = in.read(head, 4);
  BRISK_CHECK(got == 4, who, ": ", path, " is ", got, " bytes, too short for an IDX header (4 bytes)");
  BRISK_CHECK(head[0] == 0 && head[1] == 0, who, ": ", path, " has bad IDX magic ", hex_byte(head[0]), " ",
              hex_byte(head[1]), " (expected 0x00 0x00); is it an IDX file?");
  BRISK_CHECK(head[2] == 0x08, who, ": ", path, " has IDX type byte ", hex_byte(head[2]),
              ", expected 0x08 (unsigned bytes)");
  BRISK_CHECK(head[3] == expected_dims, who, ": ", path, " has ", int{head[3]}, " dims, expected ", expected_dims,
              expected_dims == 1 ? " (labels)" : " (images)");
  got += in.read(head + 4, header - 4);
  BRISK_CHECK(got == header, who, ": ", path, " is ", got, " bytes, too short for its ", header, "-byte IDX header");
  IdxData out;
  for (int d = 0; d < expected_dims; ++d) out.dims.push_back(be32(head + 4 + 4 * static_cast<std::ptrdiff_t>(d)));
  // As f32 images (N, 1, rows, cols): zero counts included, every stride must fit int64.
  const uint64_t payload = static_cast<uint64_t>(checked_nbytes(out.dims, 4, who + ": " + path + " dims")) / 4;
  BRISK_CHECK(payload <= max_payload, who, ": ", path, " declares dims ", out.dims, " (", payload,
              " bytes), more than the limit of ", max_payload, " bytes");
  // Grow with the data that actually arrives, so that a short file claiming huge dims costs little.
  constexpr size_t kChunk = size_t{1} << 20;
  size_t have = 0;
  while (have < payload) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(payload - have, std::max(kChunk, have)));
    out.bytes.resize(have + want);
    const size_t n = in.read(out.bytes.data() + have, want);
    have += n;
    if (n < want) break;
  }
  out.bytes.resize(have);
  BRISK_CHECK(have == payload, who, ": ", path, " has ", have, " bytes of data after its header but dims ", out.dims,
              " need exactly ", payload);
  uint8_t extra = 0;
  BRISK_CHECK(in.read(&extra, 1) == 0, who, ": ", path, " has more data after its header than the ", payload,
              " bytes its dims ", out.dims, " need");
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

IdxData read_idx(const std::string& path, int expected_dims, const std::string& who, uint64_t max_payload) {
  FileSource src(path, who, "");
  Decoder in(src, path, who);
  return decode_idx(in, path, expected_dims, who, max_payload);
}

IdxData parse_idx(std::string_view bytes, int expected_dims, const std::string& what, const std::string& who,
                  uint64_t max_payload) {
  MemorySource src(bytes);
  Decoder in(src, what, who);
  return decode_idx(in, what, expected_dims, who, max_payload);
}

namespace {

IdxData read_idx_file(const std::string& path, int expected_dims, const std::string& who, const std::string& fix) {
  FileSource src(path, who, fix);
  Decoder in(src, path, who);
  return decode_idx(in, path, expected_dims, who, kMaxIdxPayload);
}

}  // namespace

std::pair<Tensor, Tensor> MNIST::load(Split split, const Source& src) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string img_path = idx_path(src.dir, prefix + "-images-idx3-ubyte");
  const std::string lbl_path = idx_path(src.dir, prefix + "-labels-idx1-ubyte");
  IdxData img = read_idx_file(img_path, 3, src.name, src.fix);
  IdxData lbl = read_idx_file(lbl_path, 1, src.name, src.fix);
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

MNIST::MNIST(Split split, const std::string& dir, const std::pair<Tensor, Tensor>& loaded)
    : TensorDataset(loaded.first, loaded.second), dir_(dir), split_(split) {}

MNIST::MNIST(Split split, const Source& source) : MNIST(split, source.dir, load(split, source)) {}

MNIST::MNIST(Split split, const std::string& dir)
    : MNIST(split, Source{"MNIST", dir.empty() ? default_dir() : dir,
                          "put MNIST's four IDX files there, or pass the folder / set BRISK_MNIST_DIR"}) {}

std::string MNIST::default_dir() {
  return env_or("BRISK_MNIST_DIR", "/usr/share/datasets/mnist");
}

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
