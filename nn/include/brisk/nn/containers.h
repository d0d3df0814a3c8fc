// Sequential (children called in order) and ModuleList (an indexable list of children).
#pragma once
#include <memory>
#include <vector>

#include "brisk/nn/module.h"

namespace brisk::nn {

class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  // Appends a module owned by the list, registered under its index ("0", "1", ...).
  void push_back(std::shared_ptr<Module> m);
  template <class M, class... Args>
  std::shared_ptr<M> emplace_back(Args&&... args) {
    auto m = std::make_shared<M>(std::forward<Args>(args)...);
    push_back(m);
    return m;
  }
  size_t size() const { return items_.size(); }
  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    return dynamic_cast<M&>((*this)[i]);
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// Calls each child on the previous one's output.
class Sequential : public ModuleList {
 public:
  using ModuleList::ModuleList;
  Tensor forward(const Tensor& x) override;
};

}  // namespace brisk::nn
