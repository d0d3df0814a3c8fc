// MNIST and Fashion-MNIST from their four IDX files (gzip-compressed or plain): images as
// f32 (N, 1, rows, cols) scaled to [0, 1], labels as i64 (N). Every header field, the file
// sizes, the counts and the label range are checked, each failure with its own message.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "brisk/data/dataset.h"

namespace brisk::data {

enum class Split { Train, Test };

// The u8 payload of one IDX file and its dims; `expected_dims` is 1 (labels) or 3 (images).
// `who` prefixes error messages. Throws brisk::Error naming the file and the bad value.
struct IdxData {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};
// The largest payload read_idx accepts by default (1 TiB, far beyond any IDX data set).
inline constexpr uint64_t kMaxIdxPayload = uint64_t{1} << 40;
// Reads a gzip-compressed (recognised by its magic bytes) or plain IDX file. The header is read
// and validated first; the payload its dims declare (at most max_payload bytes) bounds what is
// decompressed, and anything past it, inside the gzip data or after it, is an error.
IdxData read_idx(const std::string& path, int expected_dims, const std::string& who = "read_idx",
                 uint64_t max_payload = kMaxIdxPayload);
// The same for a whole file held in memory; `what` names it in errors.
IdxData parse_idx(std::string_view bytes, int expected_dims, const std::string& what = "<memory>",
                  const std::string& who = "read_idx", uint64_t max_payload = kMaxIdxPayload);

class MNIST : public TensorDataset {
 public:
  // dir "": $BRISK_MNIST_DIR, else /usr/share/datasets/mnist.
  explicit MNIST(Split split = Split::Train, const std::string& dir = "");
  const std::string& dir() const { return dir_; }
  Split split() const { return split_; }
  const Tensor& images() const { return data(); }     // f32 (N, 1, rows, cols)
  const Tensor& labels() const { return targets(); }  // i64 (N)
  static std::string default_dir();

 protected:
  struct Source {
    std::string name;  // "MNIST", names the dataset in errors
    std::string dir;   // resolved folder
    std::string fix;   // how to get the files, appended to "cannot open" errors
  };
  MNIST(Split split, const Source& source);

 private:
  MNIST(Split split, const std::string& dir, const std::pair<Tensor, Tensor>& loaded);
  static std::pair<Tensor, Tensor> load(Split split, const Source& source);
  std::string dir_;
  Split split_;
};

// Zalando's Fashion-MNIST: same format and sizes, 10 clothing classes.
class FashionMNIST : public MNIST {
 public:
  // dir "": $BRISK_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist (Debian's
  // dataset-fashion-mnist package).
  explicit FashionMNIST(Split split = Split::Train, const std::string& dir = "");
  static std::string default_dir();
  // "T-shirt/top", "Trouser", ..., "Ankle boot" for labels 0..9.
  static const char* class_name(int64_t label);
};

}  // namespace brisk::data
