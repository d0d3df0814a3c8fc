// CUDA class losses: cross entropy fused with log-softmax, and NLL, forward and backward.
// Forward: per position the log-sum-exp (online softmax over the row, in the block tree, when
// classes are contiguous (S == 1); one thread per position walking the classes otherwise) and the
// loss; then one block reduces the positions in f64 into the count of non-ignored targets and,
// for Mean/Sum, the loss, on the device. Backward recomputes the softmax from the saved lse (a
// group of threads per row when S == 1, else one thread per logit); normalised logits are never
// stored. Targets are range-checked on the device.
#include <limits>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/index.h"
#include "brisk/kernels/device/nn.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/index_common.cuh"
#include "cuda/nn.h"
#include "cuda/nn_common.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
namespace dv = brisk::kernels::device;
using common::in_range;
using common::report_bad_value;
using common::Slot;
using nn_common::exp_a;
using nn_common::kMaxRowsPerBlock;
using nn_common::log_a;

constexpr int kReduceThreads = 512;

// The loss of one position from its lse, its target's logit and the sum of its logits (label
// smoothing), written as the CPU writes it; 0 for ignored (and, reported, out-of-range) targets.
template <class T, class I>
__device__ __forceinline__ acc_t<T> position_loss(acc_t<T> l, const T* z_of_class, int64_t class_stride, I t, int64_t C,
                                                  int64_t ignore_index, acc_t<T> e, acc_t<T> sum_z, Slot* slot,
                                                  int32_t code) {
  using A = acc_t<T>;
  if (static_cast<int64_t>(t) == ignore_index) return A(0);
  if (!in_range(t, C)) {
    report_bad_value(slot, code, static_cast<int64_t>(t), C);
    return A(0);
  }
  A loss = (A(1) - e) * (l - dv::to_acc(z_of_class[static_cast<int64_t>(t) * class_stride]));
  if (e != A(0)) loss += e / static_cast<A>(C) * (static_cast<A>(C) * l - sum_z);
  return loss;
}

// S == 1: logits (rows, C) contiguous, a group of threads per row (device/nn.h's RowPlan).
// lse, row_loss: (rows), `=`; loss_none: (rows) or null (None reduction), `=`.
template <int W, class T, class I>
__global__ void __launch_bounds__(dv::kMaxRowThreads)
    cross_entropy_rows_kernel(int64_t rows, int64_t C, const T* __restrict__ z, const I* __restrict__ targets,
                              int64_t ignore_index, acc_t<T> e, acc_t<T>* __restrict__ lse,
                              double* __restrict__ row_loss, T* __restrict__ loss_none, Slot* slot, int32_t code) {
  using A = acc_t<T>;
  using Op = dv::LogitsOp<A>;
  __shared__ dv::LogitsState<A> scratch[kMaxRowsPerBlock][dv::kWarp];
  const int tx = threadIdx.x, ty = threadIdx.y, tpr = blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y; first < rows;
       first += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t r = first + ty;
    const bool active = r < rows;
    const T* zr = z + (active ? r : 0) * C;
    dv::LogitsState<A> st = Op::identity();
    if (active) {
      dv::for_each_owned<W>(
          C, tx, tpr,
          [&](int64_t v) {
            const auto a = dv::load_vector<T, W>(zr, v);
#pragma unroll
            for (int l = 0; l < W; ++l) st = Op::push(st, dv::to_acc(a.v[l]));
          },
          [&](int64_t j) { st = Op::push(st, dv::to_acc(zr[j])); });
    }
    st = dv::block_reduce<Op>(st, scratch[ty]);
    if (tx == 0 && active) {
      const A l = st.max + log_a(st.sum);
      lse[r] = l;
      const A loss = position_loss<T>(l, zr, 1, targets[r], C, ignore_index, e, st.total, slot, code);
      row_loss[r] = static_cast<double>(loss);
      if (loss_none) loss_none[r] = dv::from_acc<T>(loss);
    }
  }
}

// S > 1: logits (N, C, S) contiguous, one thread per position (n, s) walking its classes (stride
// S; neighbouring threads read neighbouring addresses) in the CPU's order: max, then sums.
template <class T, class I>
__global__ void cross_entropy_positions_kernel(int64_t P, int64_t C, int64_t S, dv::IndexDiv s_div,
                                               const T* __restrict__ z, const I* __restrict__ targets,
                                               int64_t ignore_index, acc_t<T> e, acc_t<T>* __restrict__ lse,
                                               double* __restrict__ row_loss, T* __restrict__ loss_none, Slot* slot,
                                               int32_t code) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t pos = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; pos < P; pos += step) {
    int64_t n, s;
    s_div.divmod(pos, n, s);
    const T* zp = z + n * C * S + s;
    A mx = dv::to_acc(zp[0]);
    for (int64_t c = 1; c < C; ++c) {
      const A v = dv::to_acc(zp[c * S]);
      mx = mx < v ? v : mx;  // std::max's choice
    }
    A se = 0, sz = 0;
    for (int64_t c = 0; c < C; ++c) {
      const A v = dv::to_acc(zp[c * S]);
      se += exp_a(v - mx);
      sz += v;
    }
    const A l = mx + log_a(se);
    lse[pos] = l;
    const A loss = position_loss<T>(l, zp, S, targets[pos], C, ignore_index, e, sz, slot, code);
    row_loss[pos] = static_cast<double>(loss);
    if (loss_none) loss_none[pos] = dv::from_acc<T>(loss);
  }
}

// log_probs (N, C, S): one thread per position; row_loss `=` -log_probs[target] (0 when ignored).
template <class T, class I>
__global__ void nll_positions_kernel(int64_t P, int64_t C, int64_t S, dv::IndexDiv s_div,
                                     const T* __restrict__ log_probs, const I* __restrict__ targets,
                                     int64_t ignore_index, double* __restrict__ row_loss, T* __restrict__ loss_none,
                                     Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t pos = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; pos < P; pos += step) {
    int64_t n, s;
    s_div.divmod(pos, n, s);
    const I t = targets[pos];
    double loss = 0;
    if (static_cast<int64_t>(t) != ignore_index) {
      if (in_range(t, C)) {
        loss = -static_cast<double>(dv::to_acc(log_probs[(n * C + static_cast<int64_t>(t)) * S + s]));
      } else {
        report_bad_value(slot, code, static_cast<int64_t>(t), C);
      }
    }
    row_loss[pos] = loss;
    if (loss_none) loss_none[pos] = dv::from_acc<T>(loss);
  }
}

// One block: count = targets that are not ignore_index (`=`, f64); for Mean/Sum also loss =
// the f64 sum of row_loss (divided by count for Mean; NaN when count is 0), `=`.
template <class T, class I>
__global__ void __launch_bounds__(kReduceThreads)
    class_loss_reduce_kernel(int64_t P, const double* __restrict__ row_loss, const I* __restrict__ targets,
                             int64_t ignore_index, Reduction reduction, double* __restrict__ count,
                             T* __restrict__ loss) {
  using Op = dv::PairSumOp<double>;
  __shared__ dv::Pair<double> scratch[dv::kWarp];
  dv::Pair<double> p = Op::identity();
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    p.a += row_loss[i];
    p.b += static_cast<int64_t>(targets[i]) != ignore_index ? 1.0 : 0.0;
  }
  p = dv::block_reduce<Op>(p, scratch);
  if (threadIdx.x != 0) return;
  *count = p.b;
  if (reduction == Reduction::None) return;
  double total = p.a;
  if (reduction == Reduction::Mean) total = p.b > 0 ? total / p.b : std::numeric_limits<double>::quiet_NaN();
  *loss = dv::from_acc<T>(total);
}

// loss (P) `=` row_loss: the None reduction's per-position losses when the loss is f32 and the
// logits 16-bit (cross_entropy's loss_dtype), rounded once from f64 as the CPU's cast rounds.
__global__ void row_loss_to_f32_kernel(int64_t P, const double* __restrict__ row_loss, float* __restrict__ loss) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < P; i += step)
    loss[i] = static_cast<float>(row_loss[i]);
}

// The gradient scale of a position: grad (one per position, or one for all) over count for Mean.
__device__ __forceinline__ double loss_scale(const double* grad, bool per_position, int64_t pos, const double* count) {
  double s = grad[per_position ? pos : 0];
  if (count) {
    const double c = *count;
    s = c > 0 ? s / c : 0.0;
  }
  return s;
}

// out, logits: (N, C, S), `=`: scale * (softmax - off - hit * [c == target]); 0 at ignored positions.
// out may be z itself (the gradient over the logits): each element is read once, by the thread
// that then writes it, so z and out are not __restrict__.
template <class T, class I>
__global__ void cross_entropy_backward_kernel(int64_t total, dv::IndexDiv s_div, dv::IndexDiv c_div, int64_t C,
                                              int64_t S, const T* z, const I* __restrict__ targets,
                                              const acc_t<T>* __restrict__ lse, const double* __restrict__ grad,
                                              bool per_position, const double* __restrict__ count, int64_t ignore_index,
                                              acc_t<T> off, acc_t<T> hit, T* out, Slot* slot, int32_t code) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t q, s, n, c;
    s_div.divmod(i, q, s);
    c_div.divmod(q, n, c);
    const int64_t pos = n * S + s;
    const I t = targets[pos];
    if (static_cast<int64_t>(t) == ignore_index || !in_range(t, C)) {
      if (static_cast<int64_t>(t) != ignore_index) report_bad_value(slot, code, static_cast<int64_t>(t), C);
      out[i] = dv::from_acc<T>(A(0));
      continue;
    }
    const A k = static_cast<A>(loss_scale(grad, per_position, pos, count));
    const A g = exp_a(dv::to_acc(z[i]) - lse[pos]) - off - (c == static_cast<int64_t>(t) ? hit : A(0));
    out[i] = dv::from_acc<T>(k * g);
  }
}

// S == 1 (the usual case: logits (rows, C) contiguous): the same values as
// cross_entropy_backward_kernel, a group of threads per row (device/nn.h's RowPlan) reading the
// row's target, lse and scale once and its logits W at a time. Out-of-range targets are reported
// once per row and get zeros, as ignored ones.
template <int W, class T, class I>
__global__ void __launch_bounds__(dv::kMaxRowThreads)
    cross_entropy_backward_rows_kernel(int64_t rows, int64_t C, const T* z, const I* __restrict__ targets,
                                       const acc_t<T>* __restrict__ lse, const double* __restrict__ grad,
                                       bool per_position, const double* __restrict__ count, int64_t ignore_index,
                                       acc_t<T> off, acc_t<T> hit, T* out, Slot* slot, int32_t code) {
  using A = acc_t<T>;
  const int tx = threadIdx.x, tpr = blockDim.x;
  // No barrier below: each row's threads go on to their next row independently.
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const T* zr = z + r * C;
    T* outr = out + r * C;
    const I t = targets[r];
    const bool ignored = static_cast<int64_t>(t) == ignore_index;
    if (ignored || !in_range(t, C)) {
      if (!ignored && tx == 0) report_bad_value(slot, code, static_cast<int64_t>(t), C);
      const T zero = dv::from_acc<T>(A(0));
      dv::AlignedVector<T, W> zeros;
#pragma unroll
      for (int l = 0; l < W; ++l) zeros.v[l] = zero;
      dv::for_each_owned<W>(
          C, tx, tpr, [&](int64_t v) { dv::store_vector<T, W>(outr, v, zeros); }, [&](int64_t j) { outr[j] = zero; });
      continue;
    }
    const A k = static_cast<A>(loss_scale(grad, per_position, r, count)), l = lse[r];
    const int64_t tc = static_cast<int64_t>(t);
    auto value = [&](int64_t c, T zv) {
      const A g = exp_a(dv::to_acc(zv) - l) - off - (c == tc ? hit : A(0));
      return dv::from_acc<T>(k * g);
    };
    dv::map_owned<W>(C, tx, tpr, zr, outr, value);
  }
}

// out: (N, C, S), `=`: -scale at each non-ignored target, 0 elsewhere.
template <class T, class I>
__global__ void nll_backward_kernel(int64_t total, dv::IndexDiv s_div, dv::IndexDiv c_div, int64_t C, int64_t S,
                                    const I* __restrict__ targets, const double* __restrict__ grad, bool per_position,
                                    const double* __restrict__ count, int64_t ignore_index, T* __restrict__ out,
                                    Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t q, s, n, c;
    s_div.divmod(i, q, s);
    c_div.divmod(q, n, c);
    const int64_t pos = n * S + s;
    const I t = targets[pos];
    bool hit = false;
    if (static_cast<int64_t>(t) != ignore_index) {
      if (in_range(t, C))
        hit = c == static_cast<int64_t>(t);
      else if (c == 0)
        report_bad_value(slot, code, static_cast<int64_t>(t), C);
    }
    out[i] = hit ? dv::from_acc<T>(-loss_scale(grad, per_position, pos, count)) : dv::from_acc<T>(acc_t<T>(0));
  }
}

int32_t target_error(bool ce) {
  static const int32_t ce_id = rt::register_device_error("cross_entropy: target out of range [0, limit)");
  static const int32_t nll_id = rt::register_device_error("nll_loss: target out of range [0, limit)");
  return ce ? ce_id : nll_id;
}

// Launches the f64 reduction of the per-position losses (and the count).
template <class T, class I>
void reduce_positions(int64_t P, const Tensor& row_loss, const Tensor& targets, int64_t ignore_index,
                      Reduction reduction, const Tensor& count, const Tensor& loss, cudaStream_t stream) {
  rt::launch("class_loss_reduce", class_loss_reduce_kernel<T, I>, dim3(1), dim3(kReduceThreads), 0, stream, P,
             static_cast<const double*>(row_loss.data_ptr()), static_cast<const I*>(targets.data_ptr()), ignore_index,
             reduction, static_cast<double*>(count.data_ptr()), static_cast<T*>(loss.data_ptr()));
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
                   double label_smoothing, Reduction reduction, const Tensor& loss, const Tensor& lse,
                   const Tensor& count) {
  OpScope scope("cross_entropy", &logits, &targets);
  const int32_t code = target_error(true);
  const int64_t P = targets.numel();
  const int device = logits.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  Tensor row_loss = empty({P}, DType::F64, logits.device());
  visit_float(logits.dtype(), logits.device(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    visit_index(targets.dtype(), targets.device(), "cross_entropy", [&](auto itag) {
      using I = decltype(itag);
      const T* zp = static_cast<const T*>(logits.data_ptr());
      const I* tp = static_cast<const I*>(targets.data_ptr());
      A* lp = static_cast<A*>(lse.data_ptr());
      double* rp = static_cast<double*>(row_loss.data_ptr());
      // The loss in the logits' dtype, or f32 for 16-bit logits (loss_dtype): the kernels write
      // the former as they go, the latter from the f64 per-position losses afterwards.
      const bool own_dtype = loss.dtype() == logits.dtype();
      T* none = reduction == Reduction::None && own_dtype ? static_cast<T*>(loss.data_ptr()) : nullptr;
      const A e = static_cast<A>(label_smoothing);
      if (P > 0 && S == 1) {
        const auto l = nn_common::row_launch(P, C, sizeof(T), {zp}, device);
        auto go = [&](auto kernel) {
          rt::launch("cross_entropy_rows", kernel, l.grid, l.block, 0, stream, P, C, zp, tp, ignore_index, e, lp, rp,
                     none, rt::device_error_slot(), code);
        };
        if (l.vectorized)
          go(cross_entropy_rows_kernel<dv::vec_width<T>, T, I>);
        else
          go(cross_entropy_rows_kernel<1, T, I>);
      } else if (P > 0) {
        rt::launch("cross_entropy_positions", cross_entropy_positions_kernel<T, I>,
                   dim3(nn_common::grid_for(P, device)), dim3(256), 0, stream, P, C, S, dv::IndexDiv(S, P), zp, tp,
                   ignore_index, e, lp, rp, none, rt::device_error_slot(), code);
      }
      if (own_dtype) {
        reduce_positions<T, I>(P, row_loss, targets, ignore_index, reduction, count, loss, stream);
        return;
      }
      reduce_positions<float, I>(P, row_loss, targets, ignore_index, reduction, count, loss, stream);
      if (reduction == Reduction::None && P > 0)
        rt::launch("cross_entropy_loss_f32", row_loss_to_f32_kernel, dim3(nn_common::grid_for(P, device)), dim3(256), 0,
                   stream, P, static_cast<const double*>(row_loss.data_ptr()), static_cast<float*>(loss.data_ptr()));
    });
  });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& count, int64_t C, int64_t S, int64_t ignore_index, double label_smoothing,
                            Reduction reduction, const Tensor& out) {
  OpScope scope("cross_entropy backward", &grad, &logits, &targets);
  const int32_t code = target_error(true);
  const int64_t total = logits.numel();
  if (total == 0) return;
  const int device = logits.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const double* cp = reduction == Reduction::Mean ? static_cast<const double*>(count.data_ptr()) : nullptr;
  visit_float(logits.dtype(), logits.device(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A e = static_cast<A>(label_smoothing), off = e / static_cast<A>(C), hit = A(1) - e;
    visit_index(targets.dtype(), targets.device(), "cross_entropy backward", [&](auto itag) {
      using I = decltype(itag);
      if (S == 1) {
        const T* zp = static_cast<const T*>(logits.data_ptr());
        T* op = static_cast<T*>(out.data_ptr());
        const int64_t rows = total / C;
        const auto l = nn_common::row_launch(rows, C, sizeof(T), {zp, op}, device);
        auto go = [&](auto kernel) {
          rt::launch("cross_entropy_backward_rows", kernel, l.grid, l.block, 0, stream, rows, C, zp,
                     static_cast<const I*>(targets.data_ptr()), static_cast<const A*>(lse.data_ptr()),
                     static_cast<const double*>(grad.data_ptr()), reduction == Reduction::None, cp, ignore_index, off,
                     hit, op, rt::device_error_slot(), code);
        };
        if (l.vectorized)
          go(cross_entropy_backward_rows_kernel<dv::vec_width<T>, T, I>);
        else
          go(cross_entropy_backward_rows_kernel<1, T, I>);
        return;
      }
      rt::launch("cross_entropy_backward", cross_entropy_backward_kernel<T, I>,
                 dim3(nn_common::grid_for(total, device)), dim3(256), 0, stream, total, dv::IndexDiv(S, total),
                 dv::IndexDiv(C, total / S), C, S, static_cast<const T*>(logits.data_ptr()),
                 static_cast<const I*>(targets.data_ptr()), static_cast<const A*>(lse.data_ptr()),
                 static_cast<const double*>(grad.data_ptr()), reduction == Reduction::None, cp, ignore_index, off, hit,
                 static_cast<T*>(out.data_ptr()), rt::device_error_slot(), code);
    });
  });
}

void nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
              Reduction reduction, const Tensor& loss, const Tensor& count) {
  OpScope scope("nll_loss", &log_probs, &targets);
  const int32_t code = target_error(false);
  const int64_t P = targets.numel();
  const int device = log_probs.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  Tensor row_loss = empty({P}, DType::F64, log_probs.device());
  visit_float(log_probs.dtype(), log_probs.device(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    visit_index(targets.dtype(), targets.device(), "nll_loss", [&](auto itag) {
      using I = decltype(itag);
      if (P > 0) {
        T* none = reduction == Reduction::None ? static_cast<T*>(loss.data_ptr()) : nullptr;
        rt::launch("nll_loss", nll_positions_kernel<T, I>, dim3(nn_common::grid_for(P, device)), dim3(256), 0, stream,
                   P, C, S, dv::IndexDiv(S, P), static_cast<const T*>(log_probs.data_ptr()),
                   static_cast<const I*>(targets.data_ptr()), ignore_index, static_cast<double*>(row_loss.data_ptr()),
                   none, rt::device_error_slot(), code);
      }
      reduce_positions<T, I>(P, row_loss, targets, ignore_index, reduction, count, loss, stream);
    });
  });
}

void nll_loss_backward(const Tensor& grad, const Tensor& targets, const Tensor& count, int64_t C, int64_t S,
                       int64_t ignore_index, Reduction reduction, const Tensor& out) {
  OpScope scope("nll_loss backward", &grad, &targets);
  const int32_t code = target_error(false);
  const int64_t total = out.numel();
  if (total == 0) return;
  const int device = out.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const double* cp = reduction == Reduction::Mean ? static_cast<const double*>(count.data_ptr()) : nullptr;
  visit_float(out.dtype(), out.device(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    visit_index(targets.dtype(), targets.device(), "nll_loss backward", [&](auto itag) {
      using I = decltype(itag);
      rt::launch("nll_loss_backward", nll_backward_kernel<T, I>, dim3(nn_common::grid_for(total, device)), dim3(256), 0,
                 stream, total, dv::IndexDiv(S, total), dv::IndexDiv(C, total / S), C, S,
                 static_cast<const I*>(targets.data_ptr()), static_cast<const double*>(grad.data_ptr()),
                 reduction == Reduction::None, cp, ignore_index, static_cast<T*>(out.data_ptr()),
                 rt::device_error_slot(), code);
    });
  });
}

}  // namespace brisk::kernels::cuda
