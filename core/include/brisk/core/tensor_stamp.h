// TensorStamp: what a tensor's contents were when a copy was made from them, so the copy can tell
// later whether it still holds the same values (the autocast weight cache, an optimizer's
// low-precision parameter copies). Core keeps no checksum: it trusts the storage's version
// counter, which every in-place write through brisk bumps (kernels, optimizers, load_state_dict,
// set_data), plus the storage's identity and the view metadata. Code that rewrites a storage's
// bytes without bumping its version (ZeRO-3 refilling released parameters) must drop copies
// itself (clear_autocast_cache).
#pragma once
#include <cstdint>
#include <memory>

#include "brisk/core/tensor.h"

namespace brisk {

class TensorStamp {
 public:
  TensorStamp() = default;
  explicit TensorStamp(const Tensor& t);
  // True when `t` is the same view of the same storage as when stamped, and nothing wrote to that
  // storage since through brisk's ops: no in-place op, no set_data (a new storage).
  bool matches(const Tensor& t) const;

 private:
  // Held weakly and compared by owner (control block), which stays allocated while this stamp
  // lives: a storage made later can never compare equal, even at a reused address.
  std::weak_ptr<StorageImpl> storage_;
  bool stamped_ = false;
  uint32_t version_ = 0;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
  Shape sizes_;
  Strides strides_;
};

}  // namespace brisk
