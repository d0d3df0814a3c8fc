// The autocast weight cache: one per thread, keyed by the parameter's impl and the target dtype.
#include "brisk/core/autocast_cache.h"

#include <map>
#include <memory>
#include <utility>

#include "brisk/core/autocast.h"
#include "brisk/core/tensor_stamp.h"

namespace brisk {

namespace {

struct Entry {
  // The parameter, held weakly (the cache must not keep a model alive) and compared by owner, so
  // a tensor made later at the same address is never mistaken for it.
  std::weak_ptr<TensorImpl> source;
  TensorStamp stamp;
  Tensor cast;
};

using Key = std::pair<const TensorImpl*, DType>;
thread_local std::map<Key, Entry> tl_cache;

bool same_impl(const std::weak_ptr<TensorImpl>& w, const Tensor& t) {
  return !w.owner_before(t.impl_ptr()) && !t.impl_ptr().owner_before(w);
}

}  // namespace

Tensor autocast_cache_find(const Tensor& source, DType dtype) {
  if (tl_cache.empty() || !source.defined()) return Tensor();
  auto it = tl_cache.find({source.impl(), dtype});
  if (it == tl_cache.end()) return Tensor();
  const Entry& e = it->second;
  if (!same_impl(e.source, source) || !e.stamp.matches(source)) return Tensor();
  return e.cast;
}

void autocast_cache_put(const Tensor& source, const Tensor& cast) {
  if (autocast_nesting() == 0 || !source.defined() || !cast.defined()) return;
  tl_cache[{source.impl(), cast.dtype()}] = Entry{source.impl_ptr(), TensorStamp(source), cast};
}

size_t autocast_cache_size() {
  return tl_cache.size();
}

void clear_autocast_cache() {
  tl_cache.clear();
}

}  // namespace brisk
