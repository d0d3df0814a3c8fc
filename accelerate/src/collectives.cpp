// The collectives users call for metrics and data: gather, gather_for_metrics, reduce, broadcast,
// pad_across_processes, split_between_processes, skip_first_batches; and on_every_rank, which
// lets every rank learn whether a step failed on any (save_state, load_state).
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "accelerator_impl.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/autograd/autograd.h"
#include "brisk/core/profiler.h"
#include "brisk/core/rng.h"
#include "brisk/data/sampler.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"
#include "brisk/kernels/optim.h"
#include "brisk/kernels/settings.h"
#include "brisk/optim/clip.h"
#include "brisk/util/env.h"
#include "brisk/util/trace.h"

namespace brisk {

namespace {

Tensor contiguous_detached(const Tensor& t) {
  Tensor x = t.detach();
  return x.is_contiguous() ? x : kernels::contiguous(x);
}

}  // namespace

void accelerate::detail::on_every_rank(dist::ProcessGroup* pg, int world_size, const char* op,
                                       const std::function<void()>& body, const std::function<void()>& on_failure) {
  std::string error;
  try {
    body();
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = std::string(op) + ": " + e.what();
  }
  bool failed_elsewhere = false;
  if (world_size > 1) {
    Tensor flag = full({1}, error.empty() ? 0.0 : 1.0, {.dtype = DType::I64});
    pg->all_reduce(flag, {.op = dist::ReduceOp::Max});
    failed_elsewhere = error.empty() && flag.item<int64_t>() != 0;
  }
  if ((!error.empty() || failed_elsewhere) && on_failure) on_failure();
  if (!error.empty()) BRISK_THROW(error);
  if (failed_elsewhere) BRISK_THROW(op, ": another rank failed (see its error)");
}

// --- collectives ---------------------------------------------------------------------------------

Tensor Accelerator::gather(const Tensor& t) {
  BRISK_CHECK(t.defined(), "Accelerator::gather: the tensor is undefined");
  Tensor x = contiguous_detached(t.dim() == 0 ? t.reshape({1}) : t);
  if (world_size_ == 1) return x;
  // Shapes must agree: compare them first so a mismatch is an error, not a hang.
  constexpr int64_t kMaxDims = 16;
  BRISK_CHECK(x.dim() <= kMaxDims, "Accelerator::gather: at most ", kMaxDims, " dims, got ", x.sizes());
  std::vector<int64_t> mine(kMaxDims + 2, -1);
  mine[0] = x.dim();
  mine[1] = static_cast<int64_t>(x.dtype());
  for (int64_t d = 0; d < x.dim(); ++d) mine[static_cast<size_t>(d + 2)] = x.size(d);
  Tensor all = pg_->all_gather(from_vector<int64_t>(mine, {1, kMaxDims + 2}));
  std::vector<int64_t> v = all.to_vector<int64_t>();
  for (int r = 1; r < world_size_; ++r) {
    bool same = std::equal(v.begin(), v.begin() + kMaxDims + 2, v.begin() + r * (kMaxDims + 2));
    if (!same) {
      std::ostringstream os;
      for (int q = 0; q < world_size_; ++q) {
        const int64_t* row = v.data() + q * (kMaxDims + 2);
        os << (q ? ", " : "") << "rank " << q << " " << dtype_name(static_cast<DType>(row[1])) << " [";
        for (int64_t d = 0; d < row[0]; ++d) os << (d ? ", " : "") << row[d + 2];
        os << "]";
      }
      BRISK_THROW("Accelerator::gather: shapes and dtypes must match on every process, got ", os.str(),
                  " (pad_across_processes makes them equal)");
    }
  }
  return pg_->all_gather(x);
}

Tensor Accelerator::gather_for_metrics(const Tensor& t) {
  BRISK_CHECK(t.defined(), "Accelerator::gather_for_metrics: the tensor is undefined");
  LoaderState* l = active_loader();
  Tensor x = contiguous_detached(t.dim() == 0 ? t.reshape({1}) : t);
  Tensor out = x;
  if (world_size_ > 1) {
    std::vector<Tensor> parts = pg_->all_gather_uneven(x);
    out = kernels::cat(parts, 0);
  }
  // On the last batch of an epoch, the tail of the gathered round repeats samples from the start.
  if (l && l->sharded && l->at_end()) {
    const int64_t real = l->iterable ? l->shard->last_round_real() : l->last_round_real;
    const int64_t size = l->iterable ? l->shard->round_size() : l->last_round_size;
    if (size > 0 && real < size && out.size(0) == size) out = kernels::contiguous(out.narrow(0, 0, real));
  }
  return out;
}

Tensor Accelerator::reduce(const Tensor& t, dist::ReduceOp op) {
  BRISK_CHECK(op != dist::ReduceOp::Mean || t.is_floating_point(),
              "Accelerator::reduce: mean needs a floating-point tensor, got ", dtype_name(t.dtype()));
  Tensor x = empty(t.sizes(), t.dtype(), t.device());
  kernels::copy_(x, t.detach());
  if (world_size_ == 1) return x;
  pg_->all_reduce(x, {.op = op});
  return x;
}

Tensor Accelerator::broadcast(const Tensor& t, int from) {
  BRISK_CHECK(from >= 0 && from < world_size_, "Accelerator::broadcast: from must be a rank in [0, ", world_size_,
              "), got ", from);
  Tensor x = empty(t.sizes(), t.dtype(), t.device());
  kernels::copy_(x, t.detach());
  if (world_size_ > 1) pg_->broadcast(x, {.root = from});
  return x;
}

Tensor Accelerator::pad_across_processes(const Tensor& t, int64_t dim, double value, bool pad_first) {
  BRISK_CHECK(t.defined() && t.dim() >= 1, "Accelerator::pad_across_processes: needs a tensor with at least one dim");
  const int64_t d = wrap_dim(dim, t.dim(), "Accelerator::pad_across_processes");
  if (world_size_ == 1) return t;
  Tensor size = from_vector<int64_t>({t.size(d)}, {1});
  pg_->all_reduce(size, {.op = dist::ReduceOp::Max});
  const int64_t longest = size.item<int64_t>();
  if (longest == t.size(d)) return t;
  Shape shape = t.sizes();
  shape[static_cast<size_t>(d)] = longest;
  Tensor out = full(shape, value, {.dtype = t.dtype(), .device = t.device()});
  Tensor region = out.narrow(d, pad_first ? longest - t.size(d) : 0, t.size(d));
  kernels::copy_(region, t.detach());
  return out;
}

std::pair<int64_t, int64_t> Accelerator::share(int64_t n) const {
  const int64_t base = n / world_size_, extra = n % world_size_;
  const int64_t begin = rank_ * base + std::min<int64_t>(rank_, extra);
  return {begin, begin + base + (rank_ < extra ? 1 : 0)};
}

Tensor Accelerator::split_between_processes(const Tensor& t) const {
  BRISK_CHECK(t.defined() && t.dim() >= 1, "Accelerator::split_between_processes: needs a tensor with a dim 0");
  auto [begin, end] = share(t.size(0));
  return t.narrow(0, begin, end - begin);
}

data::DataLoader& Accelerator::skip_first_batches(data::DataLoader& loader, int64_t n) {
  loader.set_start_batch(n);
  return loader;
}

}  // namespace brisk
