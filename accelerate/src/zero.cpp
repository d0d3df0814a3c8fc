// ZeRO stages 1 and 2 for one prepared optimizer: the layout of the shards, the gradient hooks and
// reduce-scatters, and the all-gather after the step (zero.h explains; docs/sharding.md for users).
#include "zero.h"

#include <algorithm>
#include <string>

#include "brisk/autograd/grad_mode.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/error.h"
#include "brisk/util/trace.h"

namespace brisk::accelerate::detail {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// p's elements as a flat view (parameters are contiguous: nn makes them so).
Tensor flat_view(const Tensor& p) {
  Tensor d = p.detach();
  BRISK_CHECK(d.is_contiguous(), "Accelerator (sharding): a parameter of shape ", p.sizes(), " is not contiguous");
  return d.view({d.numel()});
}

void wait_quietly(const dist::WorkPtr& w) {
  try {
    if (w) w->wait();
  } catch (const std::exception&) {
  }
}

}  // namespace

struct ZeroEngine::Impl {
  struct Member {
    size_t param;
    int64_t offset;  // in the bucket's flat buffer
    int64_t numel;
  };
  struct Bucket {
    size_t group = 0;
    std::vector<Member> members;
    int64_t numel = 0, padded = 0, block = 0;  // block = padded / N, this rank's share
    int64_t shard_offset = 0;                  // where this rank's block sits in the group's shard
    size_t pending = 0;
    Tensor flat;  // the gradients of a pass (freed once reduced)
    dist::WorkPtr work;
  };

  Sharding stage;
  optim::Optimizer& opt;
  dist::ProcessGroup& pg;
  int N = 1, r = 0;
  std::vector<Tensor> params;
  std::vector<size_t> bucket_of;
  std::vector<Bucket> buckets;
  std::vector<Tensor> shards;      // per group: this rank's blocks, what the optimizer steps
  std::vector<Tensor> pass_grads;  // per group: the shard's gradient being reduced in this pass
  bool armed = false;              // zero2: the hooks reduce in this backward pass
  bool syncing = false;
  std::vector<char> ready;
  size_t next_launch = 0;

  Impl(Sharding s, optim::Optimizer& o, dist::ProcessGroup& g) : stage(s), opt(o), pg(g) {}

  void fill_bucket(Bucket& b) {
    if (b.flat.defined()) return;
    MemoryCategoryGuard cat(MemoryCategory::Gradients);
    b.flat = empty({b.padded}, shards[b.group].dtype(), shards[b.group].device());
    if (b.padded > b.numel) kernels::fill_(b.flat.narrow(0, b.numel, b.padded - b.numel), 0.0);
  }

  // Copies parameter i's gradient (zeros without one) into its bucket and drops the gradient.
  void take_grad(size_t i) {
    const Tensor& p = params[i];
    Bucket& b = buckets[bucket_of[i]];
    fill_bucket(b);
    for (const Member& m : b.members) {
      if (m.param != i) continue;
      Tensor dst = b.flat.narrow(0, m.offset, m.numel);
      Tensor g = p.grad();
      if (g.defined()) {
        kernels::copy_(dst, (g.is_contiguous() ? g : kernels::contiguous(g)).view({m.numel}));
        p.set_grad(Tensor());
      } else {
        kernels::fill_(dst, 0.0);
      }
    }
    ready[i] = true;
    --b.pending;
  }

  // Launches every complete bucket whose predecessors are launched: the same order on every rank.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch++];
      Tensor out = pass_grads[b.group].narrow(0, b.shard_offset, b.block);
      b.work = pg.reduce_scatter_async(out, b.flat, dist::ReduceOp::Avg);
      // At most one bucket in flight: the one before is waited for and its buffer freed, so the
      // gradients held at once are one bucket reducing, one filling and this rank's shard.
      if (next_launch >= 2) finish(buckets[next_launch - 2]);
    }
  }

  void finish(Bucket& b) {
    if (b.work) b.work->wait();
    b.work.reset();
    b.flat = Tensor();
  }

  void on_grad(size_t i) {
    if (!armed || ready[i]) return;
    take_grad(i);
    launch_ready();
  }

  void drain() {
    for (Bucket& b : buckets) {
      wait_quietly(b.work);
      b.work.reset();
      b.flat = Tensor();
    }
  }
};

ZeroEngine::ZeroEngine(Sharding stage, optim::Optimizer& opt, dist::ProcessGroup& pg, double bucket_cap_mb)
    : impl_(std::make_shared<Impl>(stage, opt, pg)) {
  BRISK_CHECK(stage == Sharding::Zero1 || stage == Sharding::Zero2, "Accelerator: sharding ", enum_name(stage),
              " is not implemented (zero1 and zero2 are)");
  Impl& im = *impl_;
  im.N = pg.size();
  im.r = pg.rank();
  const int64_t N = im.N;
  std::vector<std::vector<Tensor>> replacement;
  for (size_t g = 0; g < opt.num_groups(); ++g) {
    const std::vector<Tensor>& ps = opt.params(g);
    const size_t first = im.params.size();
    for (const Tensor& p : ps) {
      BRISK_CHECK(p.dtype() == ps.front().dtype() && p.device() == ps.front().device(),
                  "Accelerator (sharding): the parameters of optimizer group ", g,
                  " must share one dtype and device, got ", dtype_name(ps.front().dtype()), " and ",
                  dtype_name(p.dtype()));
      im.params.push_back(p);
      im.bucket_of.push_back(0);
    }
    // Buckets in reverse order (the last layers' gradients are final first), as the Reducer.
    // The first bucket (the last layers' gradients) is at most 1 MiB, as the Reducer's, so that
    // zero2's first reduce-scatter starts early in backward.
    auto cap = [&] { return (im.buckets.empty() ? std::min(1.0, bucket_cap_mb) : bucket_cap_mb) * kMiB; };
    int64_t shard_len = 0;
    Impl::Bucket cur;
    cur.group = g;
    auto close = [&] {
      if (cur.members.empty()) return;
      cur.padded = (cur.numel + N - 1) / N * N;
      cur.block = cur.padded / N;
      cur.shard_offset = shard_len;
      shard_len += cur.block;
      for (const auto& m : cur.members) im.bucket_of[m.param] = im.buckets.size();
      im.buckets.push_back(std::move(cur));
      cur = Impl::Bucket();
      cur.group = g;
    };
    for (size_t k = ps.size(); k-- > 0;) {
      const size_t i = first + k;
      const Tensor& p = im.params[i];
      if (!cur.members.empty() && static_cast<double>((cur.numel + p.numel()) * p.element_size()) > cap()) close();
      cur.members.push_back({i, cur.numel, p.numel()});
      cur.numel += p.numel();
    }
    close();
    Tensor shard;
    {
      MemoryCategoryGuard cat(MemoryCategory::Parameters);
      shard = zeros({std::max<int64_t>(shard_len, 1)}, {.dtype = ps.front().dtype(), .device = ps.front().device()});
    }
    shard.requires_grad_(true);
    im.shards.push_back(shard);
    replacement.push_back({shard});
  }
  opt.replace_params(std::move(replacement));
  im.pass_grads.assign(im.shards.size(), Tensor());
  im.ready.assign(im.params.size(), 0);
  std::weak_ptr<Impl> self = impl_;
  if (stage == Sharding::Zero2)
    for (size_t i = 0; i < im.params.size(); ++i)
      if (im.params[i].requires_grad())
        im.params[i].register_hook([self, i](const Tensor&) {
          if (auto s = self.lock()) s->on_grad(i);
        });
}

ZeroEngine::~ZeroEngine() {
  impl_->armed = false;
  impl_->drain();
}

void ZeroEngine::begin_backward(bool sync) {
  Impl& im = *impl_;
  im.drain();  // a pass that died half-way
  im.syncing = sync;
  im.armed = sync && im.stage == Sharding::Zero2;
  if (!sync) return;
  std::fill(im.ready.begin(), im.ready.end(), 0);
  for (auto& b : im.buckets) b.pending = b.members.size();
  im.next_launch = 0;
  MemoryCategoryGuard cat(MemoryCategory::Gradients);
  for (size_t g = 0; g < im.shards.size(); ++g)
    im.pass_grads[g] = zeros({im.shards[g].numel()}, {.dtype = im.shards[g].dtype(), .device = im.shards[g].device()});
}

void ZeroEngine::end_backward() {
  Impl& im = *impl_;
  if (!im.syncing) return;
  im.armed = false;
  im.syncing = false;
  auto span = trace_span("reduce-scatter gradients", "comm");
  NoGradGuard no_grad;
  // zero1 reduces everything now; zero2 what the hooks did not see (parameters that got no
  // gradient in this pass: their accumulated gradient, or zeros).
  for (auto& b : im.buckets) {
    for (const auto& m : b.members)
      if (!im.ready[m.param]) im.take_grad(m.param);
    im.launch_ready();
  }
  for (auto& b : im.buckets) im.finish(b);
  // A gradient accumulated after its hook had fired in this pass (a leaf reached by two separate
  // passes inside one backward) came too late for its bucket: refuse rather than lose it.
  for (size_t i = 0; i < im.params.size(); ++i)
    BRISK_CHECK(!im.params[i].grad().defined(), "Accelerator::backward (sharding ", enum_name(im.stage),
                "): a parameter of shape ", im.params[i].sizes(),
                " received more gradient after it was reduced in this backward pass; this stage cannot reduce it "
                "twice in one pass (docs/sharding.md)");
  for (size_t g = 0; g < im.shards.size(); ++g) {
    Tensor sg = im.shards[g].grad();
    if (sg.defined())
      kernels::add_(sg, im.pass_grads[g]);
    else
      im.shards[g].set_grad(im.pass_grads[g]);
    im.pass_grads[g] = Tensor();
  }
}

void ZeroEngine::before_step() {
  Impl& im = *impl_;
  NoGradGuard no_grad;
  for (const auto& b : im.buckets) {
    const int64_t lo = im.r * b.block, hi = lo + b.block;
    for (const auto& m : b.members) {
      const int64_t a = std::max(lo, m.offset), e = std::min(hi, m.offset + m.numel);
      if (a >= e) continue;
      kernels::copy_(im.shards[b.group].narrow(0, b.shard_offset + a - lo, e - a),
                     flat_view(im.params[m.param]).narrow(0, a - m.offset, e - a));
    }
  }
}

void ZeroEngine::after_step() {
  Impl& im = *impl_;
  NoGradGuard no_grad;
  auto span = trace_span("all-gather parameters", "comm");
  std::vector<Tensor> outs;
  std::vector<dist::WorkPtr> works;
  for (const auto& b : im.buckets) {
    Tensor out = empty({b.padded}, im.shards[b.group].dtype(), im.shards[b.group].device());
    works.push_back(im.pg.all_gather_async(out, im.shards[b.group].narrow(0, b.shard_offset, b.block)));
    outs.push_back(out);
  }
  for (size_t k = 0; k < im.buckets.size(); ++k) {
    works[k]->wait();
    for (const auto& m : im.buckets[k].members)
      kernels::copy_(flat_view(im.params[m.param]), outs[k].narrow(0, m.offset, m.numel));
    outs[k] = Tensor();
  }
}

bool ZeroEngine::owns(const Tensor& p) const {
  for (const Tensor& q : impl_->params)
    if (q.is_same(p)) return true;
  return false;
}

std::vector<Tensor> ZeroEngine::shard_grads() const {
  std::vector<Tensor> out;
  for (const Tensor& s : impl_->shards)
    if (Tensor g = s.grad(); g.defined()) out.push_back(g);
  return out;
}

int64_t ZeroEngine::numel() const {
  int64_t n = 0;
  for (const auto& b : impl_->buckets) n += b.numel;
  return n;
}

int64_t ZeroEngine::padded_numel() const {
  int64_t n = 0;
  for (const auto& b : impl_->buckets) n += b.padded;
  return n;
}

optim::Optimizer& ZeroEngine::optimizer() const {
  return impl_->opt;
}

ZeroLayout ZeroEngine::layout() const {
  const Impl& im = *impl_;
  ZeroLayout l;
  l.num_processes = im.N;
  l.group_params.assign(im.shards.size(), 0);
  for (const auto& b : im.buckets) {
    ZeroLayout::Bucket lb;
    lb.group = b.group;
    lb.padded = b.padded;
    for (const auto& m : b.members) lb.members.push_back({m.param, m.numel});
    l.group_params[b.group] += b.members.size();
    l.buckets.push_back(std::move(lb));
  }
  return l;
}

const std::vector<Tensor>& ZeroEngine::params() const {
  return impl_->params;
}

int64_t ZeroLayout::shard_numel(size_t group) const {
  int64_t n = 0;
  for (const Bucket& b : buckets)
    if (b.group == group) n += b.padded / num_processes;
  return std::max<int64_t>(n, 1);
}

}  // namespace brisk::accelerate::detail
