// ZeRO stages 1 and 2 for one prepared optimizer: the layout of the shards, the gradient hooks and
// reduce-scatters, and the all-gather after the step (zero.h explains; docs/sharding.md for users).
#include "zero.h"

#include <algorithm>
#include <string>

#include "brisk/autograd/grad_mode.h"
#include "brisk/core/autocast_cache.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/nn/layers.h"
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
    Tensor full;      // zero3: the gathered parameters (the members are views of it; bytes released between uses)
    size_t unit = 0;  // zero3
  };
  // zero3: a group of modules' parameters gathered and released together.
  struct Unit {
    std::string name;
    nn::Module* module = nullptr;
    std::vector<size_t> buckets;
    size_t params = 0, pending = 0;
    bool gathered = false;  // its bytes are allocated and its all-gather issued (maybe still in flight)
    bool root = false;
    std::vector<dist::WorkPtr> inflight;  // a prefetch not yet waited for
    int64_t bytes = 0;
    // The unit expected next in forward / in backward (prefetched while this one computes), or -1.
    int64_t next_forward = -1, next_backward = -1;
    double issued_us = 0, used_us = 0;  // BRISK_TRACE: when its all-gather was issued / it was gathered for use
  };
  std::vector<Unit> units;
  std::vector<size_t> unit_of;  // per parameter

  Sharding stage;
  optim::Optimizer& opt;
  dist::ProcessGroup& pg;
  int N = 1, r = 0;
  std::vector<Tensor> params;
  std::vector<size_t> group_of;          // per parameter: its optimizer group
  std::vector<int64_t> group_shard_len;  // zero3: per group
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
    if (stage == Sharding::Zero3) {
      if (ready3[i]) return;
      ready3[i] = 1;
      if (armed) {
        take_grad(i);
        launch_ready();
      }
      Unit& u = units[unit_of[i]];
      if (u.pending > 0 && --u.pending == 0) release(u);  // its backward is over
      return;
    }
    if (!armed || ready[i]) return;
    take_grad(i);
    launch_ready();
  }

  std::vector<char> ready3;  // zero3: the parameter's gradient is final in this pass

  // Allocates the unit's buffers and issues their all-gathers without waiting (a prefetch).
  void issue(Unit& u) {
    if (u.gathered) return;
    NoGradGuard no_grad;
    // Refilled bytes keep the storage's version (a version bump would fail the saved-tensor checks
    // of the backward), so casts the autocast weight cache made from the old ones must go.
    clear_autocast_cache();
    for (size_t k : u.buckets) {
      Bucket& b = buckets[k];
      b.full.storage()->allocate_again();
      u.inflight.push_back(pg.all_gather_async(b.full, shards[b.group].detach().narrow(0, b.shard_offset, b.block)));
    }
    u.gathered = true;
    if (trace_enabled()) {
      u.issued_us = trace_now_us();
      trace_instant("issue all-gather " + u.name, "comm", kTraceComputeTid, u.issued_us);
    }
  }

  void wait(Unit& u) {
    if (u.inflight.empty()) return;
    const bool trace = trace_enabled();
    const double t0 = trace ? trace_now_us() : 0;
    bool done_before = true;
    for (auto& w : u.inflight) done_before = done_before && w->is_completed();
    for (auto& w : u.inflight) w->wait();
    u.inflight.clear();
    if (!trace) return;
    // On the communication lane: from the issue to when it was known to be done (already done
    // when needed: its end is at most t0, drawn so).
    const double t1 = trace_now_us();
    trace_complete("all-gather " + u.name, "comm", u.issued_us, done_before ? t0 : t1, kTraceCommTid);
    if (!done_before) trace_complete("wait all-gather " + u.name, "comm", t0, t1, kTraceComputeTid);
  }

  // The unit's parameters ready to use; the unit after it (in `forward` or backward order)
  // prefetched so that its all-gather overlaps this unit's compute.
  void gather(Unit& u, bool forward) {
    issue(u);
    wait(u);
    if (trace_enabled()) u.used_us = trace_now_us();
    const int64_t next = forward ? u.next_forward : u.next_backward;
    if (next >= 0) issue(units[static_cast<size_t>(next)]);
  }

  void release(Unit& u) {
    if (!u.gathered) return;
    if (trace_enabled() && u.inflight.empty() && u.used_us > 0) {
      trace_complete(u.name + " gathered", "compute", u.used_us, trace_now_us(), 2);
      u.used_us = 0;
    }
    for (auto& w : u.inflight) wait_quietly(w);
    u.inflight.clear();
    for (size_t k : u.buckets) buckets[k].full.storage()->release();
    u.gathered = false;
  }

  // This rank's block of each gathered bucket into the shards (after the parameters were set by hand).
  void scatter(Unit& u) {
    NoGradGuard no_grad;
    for (size_t k : u.buckets) {
      Bucket& b = buckets[k];
      kernels::copy_(shards[b.group].detach().narrow(0, b.shard_offset, b.block),
                     b.full.narrow(0, r * b.block, b.block));
    }
  }

  void drain() {
    for (Bucket& b : buckets) {
      wait_quietly(b.work);
      b.work.reset();
      b.flat = Tensor();
    }
  }

  void build_units(nn::Module& model, const std::vector<std::string>& wrap);
  // The constructor's steps.
  void add_group_params(const optim::Optimizer& opt, size_t g, bool zero3);
  void shard_optimizer(optim::Optimizer& opt, double bucket_cap_mb);
  int64_t bucket_group(size_t g, size_t first, double bucket_cap_mb);
  void shard_model(optim::Optimizer& opt, nn::Module& model, const std::vector<std::string>& wrap);
  void register_unit_hooks(const std::weak_ptr<Impl>& self);
  void register_grad_hooks(const std::weak_ptr<Impl>& self);
};

namespace {

bool holds_parameters(const nn::Module& m, bool recurse) {
  return !m.named_parameters(recurse).empty();
}

}  // namespace

// zero3: the units (wrap policy), and for each unit and optimizer group one bucket whose parameters
// become views of its flat buffer; the rank's blocks go into the shards and the buffers are released.
void ZeroEngine::Impl::build_units(nn::Module& model, const std::vector<std::string>& wrap) {
  std::vector<std::pair<std::string, nn::Module*>> chosen;
  auto modules = model.named_modules();
  if (wrap.empty()) {
    // Embeddings stay in the root unit: models tie them to output heads used outside the
    // embedding's own forward (GPT-2's wte and its lm_head), which must see them gathered.
    for (auto& [name, m] : model.named_children())
      if (holds_parameters(*m, true) && !dynamic_cast<nn::Embedding*>(m)) chosen.emplace_back(name, m);
  } else if (wrap.size() == 1 && wrap[0] == "*") {
    for (auto& [name, m] : modules)
      if (!name.empty() && holds_parameters(*m, false) && !dynamic_cast<nn::Embedding*>(m))
        chosen.emplace_back(name, m);
  } else {
    for (const std::string& w : wrap) {
      nn::Module* found = nullptr;
      for (auto& [name, m] : modules)
        if (name == w && !name.empty()) found = m;
      BRISK_CHECK(found, "Accelerator: zero3_wrap names the module '", w, "', which the model does not have");
      for (auto& [name, m] : chosen)
        BRISK_CHECK(!(w.rfind(name + ".", 0) == 0 || name.rfind(w + ".", 0) == 0 || name == w),
                    "Accelerator: zero3_wrap lists '", name, "' and '", w, "': units must not nest or repeat");
      chosen.emplace_back(w, found);
    }
  }
  // The parameters' owners: the unit whose module holds it (by name), else the root unit (last).
  const nn::NamedTensors named = model.named_parameters();
  unit_of.assign(params.size(), chosen.size());
  for (size_t i = 0; i < params.size(); ++i) {
    bool in_model = false;
    for (auto& [pname, t] : named) {
      if (!t.is_same(params[i])) continue;
      in_model = true;
      for (size_t u = 0; u < chosen.size(); ++u)
        if (pname.rfind(chosen[u].first + ".", 0) == 0) unit_of[i] = u;
      break;
    }
    BRISK_CHECK(in_model, "Accelerator (sharding zero3): the optimizer's parameter ", i, " of shape ",
                params[i].sizes(), " is not a parameter of the prepared model; zero3 shards one model's parameters");
  }
  // Units in backward order (the last child's gradients are final first), the root unit last.
  std::vector<size_t> order;
  for (size_t u = chosen.size(); u-- > 0;) order.push_back(u);
  order.push_back(chosen.size());
  std::vector<size_t> index(chosen.size() + 1);
  for (size_t k = 0; k < order.size(); ++k) {
    Unit unit;
    unit.name = order[k] < chosen.size() ? chosen[order[k]].first : std::string("(root)");
    unit.module = order[k] < chosen.size() ? chosen[order[k]].second : &model;
    index[order[k]] = units.size();
    units.push_back(std::move(unit));
  }
  for (size_t i = 0; i < params.size(); ++i) unit_of[i] = index[unit_of[i]];
  const int64_t N = this->N;
  std::vector<int64_t> shard_len(shards.size(), 0);
  for (size_t u = 0; u < units.size(); ++u)
    for (size_t g = 0; g < shards.size(); ++g) {
      Bucket b;
      b.group = g;
      b.unit = u;
      for (size_t i = params.size(); i-- > 0;)
        if (unit_of[i] == u && group_of[i] == g) {
          b.members.push_back({i, b.numel, params[i].numel()});
          b.numel += params[i].numel();
        }
      if (b.members.empty()) continue;
      b.padded = (b.numel + N - 1) / N * N;
      b.block = b.padded / N;
      b.shard_offset = shard_len[g];
      shard_len[g] += b.block;
      for (const auto& m : b.members) bucket_of[m.param] = buckets.size();
      units[u].buckets.push_back(buckets.size());
      units[u].params += b.members.size();
      units[u].bytes += b.padded * static_cast<int64_t>(params[b.members[0].param].element_size());
      buckets.push_back(std::move(b));
    }
  std::vector<Unit> kept;  // units without parameters (an empty root) are dropped
  std::vector<size_t> renum(units.size(), 0);
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u].buckets.empty()) continue;
    renum[u] = kept.size();
    kept.push_back(std::move(units[u]));
  }
  units = std::move(kept);
  // Prefetch order: units[] is in backward order with the root last; the forward runs the root
  // (enclosing the others), then the children from the last of units[] to the first.
  for (size_t u = 0; u < units.size(); ++u) {
    units[u].root = units[u].module == &model;
    if (units[u].root) {
      if (u > 0) units[u].next_forward = static_cast<int64_t>(u) - 1;
      if (u > 0) units[u].next_backward = 0;
      continue;
    }
    if (u > 0) units[u].next_forward = static_cast<int64_t>(u) - 1;
    if (u + 1 < units.size() && units[u + 1].module != &model) units[u].next_backward = static_cast<int64_t>(u) + 1;
  }
  for (auto& b : buckets) b.unit = renum[b.unit];
  for (size_t i = 0; i < params.size(); ++i) unit_of[i] = renum[unit_of[i]];
  group_shard_len = shard_len;
}

// Appends optimizer group g's parameters to params (each with its group), checked: one dtype and
// device per group (a group's shard is one tensor); under zero3 each contiguous (it becomes a view
// of its bucket's buffer).
void ZeroEngine::Impl::add_group_params(const optim::Optimizer& opt, size_t g, bool zero3) {
  const std::vector<Tensor>& ps = opt.params(g);
  for (const Tensor& p : ps) {
    BRISK_CHECK(p.dtype() == ps.front().dtype() && p.device() == ps.front().device(),
                "Accelerator (sharding): the parameters of optimizer group ", g,
                " must share one dtype and device, got ", dtype_name(ps.front().dtype()), " and ",
                dtype_name(p.dtype()));
    if (zero3)
      BRISK_CHECK(p.is_contiguous(), "Accelerator (sharding zero3): a parameter of shape ", p.sizes(),
                  " is not contiguous");
    params.push_back(p);
    group_of.push_back(g);
    bucket_of.push_back(0);
  }
}

// zero1 / zero2: each group's parameters in buckets (reverse order, as the Reducer), and one shard
// per group that replaces the group's parameters in the optimizer.
void ZeroEngine::Impl::shard_optimizer(optim::Optimizer& opt, double bucket_cap_mb) {
  std::vector<std::vector<Tensor>> replacement;
  for (size_t g = 0; g < opt.num_groups(); ++g) {
    const size_t first = params.size();
    add_group_params(opt, g, false);
    const int64_t shard_len = bucket_group(g, first, bucket_cap_mb);
    const std::vector<Tensor>& ps = opt.params(g);
    Tensor shard;
    {
      MemoryCategoryGuard cat(MemoryCategory::Parameters);
      shard = zeros({std::max<int64_t>(shard_len, 1)}, {.dtype = ps.front().dtype(), .device = ps.front().device()});
    }
    shard.requires_grad_(true);
    shards.push_back(shard);
    replacement.push_back({shard});
  }
  opt.replace_params(std::move(replacement));
  pass_grads.assign(shards.size(), Tensor());
  ready.assign(params.size(), 0);
}

// Group g's parameters (params[first...]) in buckets, last parameter first: the last layers'
// gradients are final first, as the Reducer's. The first bucket (the last layers' gradients) is at
// most 1 MiB, as the Reducer's, so that zero2's first reduce-scatter starts early in backward.
// Returns the length of the group's shard.
int64_t ZeroEngine::Impl::bucket_group(size_t g, size_t first, double bucket_cap_mb) {
  auto cap = [&] { return (buckets.empty() ? std::min(1.0, bucket_cap_mb) : bucket_cap_mb) * kMiB; };
  int64_t shard_len = 0;
  Bucket cur;
  cur.group = g;
  auto close = [&] {
    if (cur.members.empty()) return;
    cur.padded = (cur.numel + N - 1) / N * N;
    cur.block = cur.padded / N;
    cur.shard_offset = shard_len;
    shard_len += cur.block;
    for (const auto& m : cur.members) bucket_of[m.param] = buckets.size();
    buckets.push_back(std::move(cur));
    cur = Bucket();
    cur.group = g;
  };
  for (size_t i = params.size(); i-- > first;) {
    const Tensor& p = params[i];
    if (!cur.members.empty() && static_cast<double>((cur.numel + p.numel()) * p.element_size()) > cap()) close();
    cur.members.push_back({i, cur.numel, p.numel()});
    cur.numel += p.numel();
  }
  close();
  return shard_len;
}

// zero3: the units and their buckets (build_units); each bucket's parameters move into its flat
// buffer (as views), this rank's block goes into the group's shard, and the buffer's bytes are
// released; the shards replace the groups' parameters in the optimizer.
void ZeroEngine::Impl::shard_model(optim::Optimizer& opt, nn::Module& model, const std::vector<std::string>& wrap) {
  for (size_t g = 0; g < opt.num_groups(); ++g) {
    add_group_params(opt, g, true);
    shards.emplace_back();  // sized by build_units
  }
  build_units(model, wrap);
  NoGradGuard no_grad;
  for (size_t g = 0; g < shards.size(); ++g) {
    const std::vector<Tensor>& ps = opt.params(g);
    const DType dt = ps.empty() ? DType::F32 : ps.front().dtype();
    const Device dev = ps.empty() ? Device(kCPU) : ps.front().device();
    MemoryCategoryGuard cat(MemoryCategory::Parameters);
    shards[g] = zeros({std::max<int64_t>(group_shard_len[g], 1)}, {.dtype = dt, .device = dev});
  }
  for (auto& b : buckets) {
    {
      MemoryCategoryGuard cat(MemoryCategory::Parameters);
      b.full = zeros({b.padded}, {.dtype = shards[b.group].dtype(), .device = shards[b.group].device()});
    }
    for (const auto& m : b.members) {
      const Tensor& p = params[m.param];
      Tensor dst = b.full.narrow(0, m.offset, m.numel);
      kernels::copy_(dst, p.detach().view({m.numel}));
      p.set_data(dst.view(p.sizes()));
    }
    kernels::copy_(shards[b.group].narrow(0, b.shard_offset, b.block), b.full.narrow(0, r * b.block, b.block));
    b.full.storage()->set_category(MemoryCategory::Parameters);
    b.full.storage()->release();
  }
  std::vector<std::vector<Tensor>> replacement;
  for (auto& s : shards) {
    s.requires_grad_(true);
    replacement.push_back({s});
  }
  opt.replace_params(std::move(replacement));
  pass_grads.assign(shards.size(), Tensor());
  ready.assign(params.size(), 0);
  ready3.assign(params.size(), 0);
}

// zero3: each unit's module gathers its parameters before its forward and releases them after,
// and gathers them again when its backward starts.
void ZeroEngine::Impl::register_unit_hooks(const std::weak_ptr<Impl>& self) {
  for (size_t u = 0; u < units.size(); ++u) {
    nn::Module& m = *units[u].module;
    m.register_forward_pre_hook([self, u](nn::Module&, const Tensor&) {
      if (auto s = self.lock()) s->gather(s->units[u], true);
    });
    m.register_forward_hook([self, u](nn::Module&, const Tensor&, const Tensor&) {
      if (auto s = self.lock()) s->release(s->units[u]);
    });
    m.register_backward_hook([self, u](nn::Module&, const Tensor&) {
      if (auto s = self.lock()) s->gather(s->units[u], false);
    });
  }
}

// zero2 and zero3: each parameter's final gradient goes into its bucket (on_grad), during backward.
void ZeroEngine::Impl::register_grad_hooks(const std::weak_ptr<Impl>& self) {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].requires_grad())
      params[i].register_hook([self, i](const Tensor&) {
        if (auto s = self.lock()) s->on_grad(i);
      });
}

ZeroEngine::ZeroEngine(Sharding stage, optim::Optimizer& opt, dist::ProcessGroup& pg, double bucket_cap_mb,
                       nn::Module* model, const std::vector<std::string>& wrap)
    : impl_(std::make_shared<Impl>(stage, opt, pg)) {
  BRISK_CHECK(stage == Sharding::Zero1 || stage == Sharding::Zero2 || stage == Sharding::Zero3,
              "Accelerator: sharding ", enum_name(stage), " is not a ZeRO stage");
  BRISK_CHECK(stage != Sharding::Zero3 || model, "Accelerator (sharding zero3): no prepared model holds this ",
              "optimizer's parameters; prepare the model before (or together with, first) its optimizer");
  Impl& im = *impl_;
  im.N = pg.size();
  im.r = pg.rank();
  if (stage == Sharding::Zero3) {
    im.shard_model(opt, *model, wrap);
    im.register_unit_hooks(impl_);
    im.register_grad_hooks(impl_);
    return;
  }
  im.shard_optimizer(opt, bucket_cap_mb);
  if (stage == Sharding::Zero2) im.register_grad_hooks(impl_);
}

ZeroEngine::~ZeroEngine() {
  impl_->armed = false;
  impl_->drain();
  for (auto& u : impl_->units)
    for (auto& w : u.inflight) wait_quietly(w);
}

void ZeroEngine::begin_backward(bool sync) {
  Impl& im = *impl_;
  im.drain();  // a pass that died half-way
  im.syncing = sync;
  im.armed = sync && (im.stage == Sharding::Zero2 || im.stage == Sharding::Zero3);
  if (im.stage == Sharding::Zero3) {
    std::fill(im.ready3.begin(), im.ready3.end(), 0);
    for (auto& u : im.units) {
      u.pending = 0;
      for (size_t k : u.buckets)
        for (const auto& m : im.buckets[k].members) u.pending += im.params[m.param].requires_grad() ? 1 : 0;
    }
  }
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
  // zero3: units whose parameters got no gradient (or not all) in this pass are released now.
  if (im.stage == Sharding::Zero3)
    for (auto& u : im.units) {
      u.pending = 0;
      im.release(u);
    }
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
  if (im.stage == Sharding::Zero3) {  // the shards are the parameters; no all-gather may read them
    for (auto& u : im.units) im.wait(u);
    return;
  }
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
  if (im.stage == Sharding::Zero3) return;  // gathered before the next use
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

void ZeroEngine::gather_all() {
  Impl& im = *impl_;
  if (im.stage != Sharding::Zero3) return;
  for (auto& u : im.units) {
    im.issue(u);
    im.wait(u);
  }
}

void ZeroEngine::scatter_and_release_all() {
  Impl& im = *impl_;
  if (im.stage != Sharding::Zero3) return;
  for (auto& u : im.units) {
    if (!u.gathered) continue;
    im.scatter(u);
    im.release(u);
  }
}

void ZeroEngine::scatter_gathered() const {
  Impl& im = *impl_;
  if (im.stage != Sharding::Zero3) return;
  for (auto& u : im.units) {
    if (!u.gathered) continue;
    im.wait(u);
    im.scatter(u);
  }
}

void ZeroEngine::refresh_gathered() const {
  Impl& im = *impl_;
  if (im.stage != Sharding::Zero3) return;
  NoGradGuard no_grad;
  clear_autocast_cache();  // the parameters' bytes are rewritten without a version bump (see issue())
  for (auto& u : im.units) {
    if (!u.gathered) continue;
    im.wait(u);
    for (size_t k : u.buckets) {
      Impl::Bucket& b = im.buckets[k];
      im.pg.all_gather_async(b.full, im.shards[b.group].detach().narrow(0, b.shard_offset, b.block))->wait();
    }
  }
}

bool ZeroEngine::shards_parameters() const {
  return impl_->stage == Sharding::Zero3;
}

std::vector<std::string> ZeroEngine::describe_units() const {
  std::vector<std::string> out;
  for (const auto& u : impl_->units) {
    int64_t n = 0;
    for (size_t k : u.buckets) n += impl_->buckets[k].numel;
    out.push_back(u.name + ": " + std::to_string(u.params) + " parameters, " + std::to_string(n) + " elements");
  }
  return out;
}

int64_t ZeroEngine::largest_unit_bytes() const {
  int64_t m = 0;
  for (const auto& u : impl_->units) m = std::max(m, u.bytes);
  return m;
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

std::vector<Tensor> ZeroEngine::shard_blocks() const {
  const Impl& im = *impl_;
  std::vector<Tensor> out;
  out.reserve(im.buckets.size());
  for (const auto& b : im.buckets) out.push_back(im.shards[b.group].detach().narrow(0, b.shard_offset, b.block));
  return out;
}

int64_t ZeroLayout::shard_numel(size_t group) const {
  int64_t n = 0;
  for (const Bucket& b : buckets)
    if (b.group == group) n += b.padded / num_processes;
  return std::max<int64_t>(n, 1);
}

}  // namespace brisk::accelerate::detail
