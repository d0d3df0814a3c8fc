// Sequential and ModuleList.
#include "brisk/nn/containers.h"

#include <string>

namespace brisk::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  BRISK_CHECK(m != nullptr, name(), "::push_back: module is null");
  register_module(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

Module& ModuleList::operator[](size_t i) const {
  BRISK_CHECK(i < items_.size(), name(), ": index ", i, " out of range for ", items_.size(), " modules");
  return *items_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : *this) h = (*m)(h);
  return h;
}

}  // namespace brisk::nn
