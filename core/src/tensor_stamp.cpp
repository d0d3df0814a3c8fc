// TensorStamp: a tensor's identity and version, to tell whether a copy made from it is current.
#include "brisk/core/tensor_stamp.h"

namespace brisk {

TensorStamp::TensorStamp(const Tensor& t)
    : storage_(t.storage()),
      stamped_(t.storage() != nullptr),
      version_(t.version()),
      offset_(t.offset()),
      dtype_(t.dtype()),
      sizes_(t.sizes()),
      strides_(t.strides()) {}

bool TensorStamp::matches(const Tensor& t) const {
  if (!stamped_ || !t.defined() || !t.storage()) return false;
  const Storage& s = t.storage();
  const bool same_storage = !storage_.owner_before(s) && !s.owner_before(storage_);
  return same_storage && s->version() == version_ && t.offset() == offset_ && t.dtype() == dtype_ &&
         t.sizes() == sizes_ && t.strides() == strides_;
}

}  // namespace brisk
