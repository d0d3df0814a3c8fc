// TEMP stub of the Reducer: a hook on each parameter queues one end-of-backward callback that
// averages every gradient with one all-reduce per parameter.
#include "brisk/dist/reducer.h"

#include "brisk/autograd/engine.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"

namespace brisk::dist {

struct Reducer::State {
  std::vector<std::pair<std::string, Tensor>> params;
  ProcessGroup* pg = nullptr;
  ReducerOptions o;
  bool sync = true, alive = true, queued = false, pending = false;
  std::vector<BucketInfo> buckets;
  std::vector<Event> events;
};

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& pg, ReducerOptions o)
    : s_(std::make_shared<State>()) {
  s_->params = std::move(params);
  s_->pg = &pg;
  s_->o = o;
  BucketInfo all{{}, 0};
  for (size_t i = s_->params.size(); i-- > 0;) {
    all.params.push_back(i);
    all.bytes += s_->params[i].second.nbytes();
  }
  s_->buckets.push_back(all);
  std::weak_ptr<State> weak = s_;
  for (auto& [name, p] : s_->params) {
    p.register_hook([weak](const Tensor&) {
      auto s = weak.lock();
      if (!s || !s->alive || !s->sync || s->queued) return;
      s->queued = true;
      s->pending = true;
      autograd::queue_callback([weak] {
        if (auto st = weak.lock(); st && st->alive) {
          st->queued = false;
          finalize_state(*st);
        }
      });
    });
  }
}

Reducer::~Reducer() { s_->alive = false; }

void Reducer::set_sync(bool sync) { s_->sync = sync; }
bool Reducer::sync() const { return s_->sync; }

void Reducer::finalize() { finalize_state(*s_); }

void Reducer::finalize_state(State& st) {
  State* s_ = &st;
  if (!s_->pending) return;
  s_->pending = false;
  std::vector<std::string> unused;
  for (auto& [name, p] : s_->params) {
    if (p.grad().defined()) continue;
    if (!s_->o.find_unused_parameters) {
      unused.push_back(name);
      continue;
    }
    p.set_grad(zeros(p.sizes(), {.dtype = p.dtype()}));
  }
  BRISK_CHECK(unused.empty(), "Reducer: parameters ", unused,
              " got no gradient in this backward pass; pass find_unused_parameters=true if that is expected");
  for (auto& [name, p] : s_->params) {
    Tensor g = p.grad();
    if (!g.is_contiguous()) {
      g = kernels::contiguous(g);
      p.set_grad(g);
    }
    s_->pg->all_reduce(g, {.op = ReduceOp::Avg, .algorithm = s_->o.algorithm});
  }
}

const std::vector<BucketInfo>& Reducer::buckets() const { return s_->buckets; }
const std::vector<Reducer::Event>& Reducer::last_step_events() const { return s_->events; }

}  // namespace brisk::dist
