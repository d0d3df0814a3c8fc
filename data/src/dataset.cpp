// Collation and TensorDataset: rows of in-memory tensors, batched with one index_select.
#include "brisk/data/dataset.h"

#include "brisk/kernels/index.h"

namespace brisk::data {

namespace {

Tensor stack_field(const std::vector<Example>& examples, bool target) {
  std::vector<Tensor> parts;
  parts.reserve(examples.size());
  size_t undefined = 0;
  for (const Example& e : examples) {
    const Tensor& t = target ? e.target : e.data;
    if (!t.defined())
      ++undefined;
    else
      parts.push_back(t);
  }
  if (undefined == examples.size()) return Tensor();
  BRISK_CHECK(undefined == 0, "collate: ", undefined, " of ", examples.size(), " examples have no ",
              target ? "target" : "data", " while the others do");
  return kernels::stack(parts, 0);
}

// Row `i` of t as a view (dim 0 dropped); no autograd history.
Tensor row(const Tensor& t, int64_t i) {
  Shape sizes(t.sizes().begin() + 1, t.sizes().end());
  Strides strides(t.strides().begin() + 1, t.strides().end());
  return t.as_strided(sizes, strides, t.offset() + i * t.stride(0));
}

}  // namespace

Batch collate(const std::vector<Example>& examples) {
  BRISK_CHECK(!examples.empty(), "collate: no examples to stack");
  return Batch{stack_field(examples, false), stack_field(examples, true)};
}

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return collate(examples);
}

TensorDataset::TensorDataset(const Tensor& data, const Tensor& targets) {
  BRISK_CHECK(data.defined(), "TensorDataset: data is undefined");
  BRISK_CHECK(data.dim() >= 1, "TensorDataset: data must have a leading example dim, got shape ", data.sizes());
  if (targets.defined()) {
    BRISK_CHECK(targets.dim() >= 1 && targets.size(0) == data.size(0), "TensorDataset: data has ", data.size(0),
                " examples (shape ", data.sizes(), ") but targets have shape ", targets.sizes());
    targets_ = targets.detach();
  }
  data_ = data.detach();
}

Example TensorDataset::get(int64_t index) const {
  BRISK_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index, " out of range for ", size(),
              " examples");
  return Example{row(data_, index), targets_.defined() ? row(targets_, index) : Tensor()};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  BRISK_CHECK(!indices.empty(), "TensorDataset::get_batch: no indices");
  for (int64_t i : indices)
    BRISK_CHECK(i >= 0 && i < size(), "TensorDataset::get_batch: index ", i, " out of range for ", size(), " examples");
  Tensor idx = from_vector<int64_t>(indices, {static_cast<int64_t>(indices.size())});
  return Batch{kernels::index_select(data_, 0, idx),
               targets_.defined() ? kernels::index_select(targets_, 0, idx) : Tensor()};
}

}  // namespace brisk::data
