// Storage: ref-counted bytes on one device. Tensors are views over a Storage.
// A storage can be released (bytes freed, size kept) and filled again in place, which is
// what sharded training does with parameters between uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "brisk/core/allocator.h"
#include "brisk/core/device.h"

namespace brisk {

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device, MemoryCategory category);
  // Bytes from a given allocator (e.g. pinned host memory), which must serve `device`'s kind.
  StorageImpl(size_t nbytes, Device device, MemoryCategory category, Allocator* allocator);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemoryCategory category() const { return category_; }
  Allocator* allocator() const { return allocator_; }
  bool is_allocated() const { return data_ != nullptr || nbytes_ == 0; }
  // Bumped by every in-place write to the bytes, through any view of them (PyTorch's version
  // counter, shared by a tensor, its views and its detached handles): autograd compares it with
  // the value a saved tensor had when it was saved.
  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }

  // Moves the counted bytes to another category (a tensor becomes a parameter, a gradient ...).
  void set_category(MemoryCategory c);
  // Frees the bytes; the size is kept so allocate_again() restores the same capacity.
  void release();
  // Allocates the bytes again after release() (contents are undefined).
  void allocate_again();

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  MemoryCategory category_;
  Allocator* allocator_;
  uint32_t version_ = 0;
};

using Storage = std::shared_ptr<StorageImpl>;

inline Storage make_storage(size_t nbytes, Device device, MemoryCategory category = MemoryCategory::Activations) {
  return std::make_shared<StorageImpl>(nbytes, device, category);
}

}  // namespace brisk
