// Fused optimizer updates and gradient reductions on the GPU. Every op covers a whole tensor list
// with multi-tensor launches (brisk/kernels/device/multi_tensor.h): each block owns one chunk of
// 65536 elements of one tensor, walks it with 128-bit vectors when every operand is 16-byte
// aligned (a scalar loop otherwise and for the tail), loads 16-bit values into f32, applies the
// per-element rule shared with the CPU (brisk/kernels/device/optim.h) and rounds once on store.
// Reductions write one f64 partial per block and a single block combines the partials in a fixed
// order, so results are deterministic and need no atomics; nothing here waits for the GPU.
#include <algorithm>
#include <array>
#include <type_traits>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/multi_tensor.h"
#include "brisk/kernels/device/optim.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/device/vec.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/launch.cuh"
#include "cuda/optim.h"

namespace brisk::kernels::cuda {

namespace {

namespace dev = brisk::kernels::device;
using brisk::cuda::detail::current_native_stream;
using brisk::cuda::detail::launch;
using dev::TensorListMeta;

constexpr int kOptimThreads = dev::kMultiTensorThreads;
constexpr int64_t kChunk = dev::kMultiTensorChunk;

// --- the element-wise multi-tensor kernel ----------------------------------------------------
// An Op has: kWrites (bit d set: list d is stored back), begin_block() (false: this block has
// nothing to do, e.g. no clipping needed) and operator()(A (&e)[Depth]) updating one element's
// values from every list in place.
//
// meta: Depth lists of contiguous T tensors, then (when C is not void) one list of C tensors, the
// low-precision copies: each gets list 0's updated value rounded to C (from_acc, as a cast does).
// Block b updates chunk meta.block_chunk[b] of slot meta.block_slot[b] (elements
// [chunk * kChunk, min(numel, (chunk + 1) * kChunk))). Writes `=`.
template <class T, int Depth, class Op, class C = void>
__global__ void multi_tensor_apply_kernel(TensorListMeta<Depth + (std::is_void_v<C> ? 0 : 1)> meta, Op op) {
  using A = acc_t<T>;
  constexpr int W = dev::vec_width<T>;
  constexpr bool kCopy = !std::is_void_v<C>;
  using CopyVector = dev::AlignedVector<std::conditional_t<kCopy, C, T>, W>;  // unused without copies
  Op local = op;
  if (!local.begin_block()) return;
  const int slot = meta.block_slot[blockIdx.x];
  const dev::ChunkRange r = dev::chunk_range(meta.numel[slot], meta.block_chunk[blockIdx.x], kChunk);
  T* base[Depth];
  bool aligned = true;
#pragma unroll
  for (int d = 0; d < Depth; ++d) {
    base[d] = static_cast<T*>(meta.addr[d][slot]) + r.begin;
    aligned = aligned && dev::is_aligned(base[d], sizeof(T) * W);
  }
  [[maybe_unused]] C* copy = nullptr;
  if constexpr (kCopy) {
    copy = static_cast<C*>(meta.addr[Depth][slot]) + r.begin;
    aligned = aligned && dev::is_aligned(copy, sizeof(C) * W);
  }
  const dev::ChunkSplit s = dev::chunk_split(r, W, aligned);
  for (int64_t v = threadIdx.x; v < s.vectors; v += blockDim.x) {
    dev::AlignedVector<T, W> x[Depth];
#pragma unroll
    for (int d = 0; d < Depth; ++d) x[d] = dev::load_vector<T, W>(base[d], v);
    [[maybe_unused]] CopyVector c;
#pragma unroll
    for (int l = 0; l < W; ++l) {
      A e[Depth];
#pragma unroll
      for (int d = 0; d < Depth; ++d) e[d] = dev::to_acc(x[d].v[l]);
      local(e);
#pragma unroll
      for (int d = 0; d < Depth; ++d)
        if (Op::kWrites & (1u << d)) x[d].v[l] = dev::from_acc<T>(e[d]);
      if constexpr (kCopy) c.v[l] = dev::from_acc<C>(e[0]);
    }
#pragma unroll
    for (int d = 0; d < Depth; ++d)
      if (Op::kWrites & (1u << d)) dev::store_vector<T, W>(base[d], v, x[d]);
    if constexpr (kCopy) dev::store_vector<C, W>(copy, v, c);
  }
  const int64_t tail_end = s.end - r.begin;
  for (int64_t i = s.tail_begin - r.begin + threadIdx.x; i < tail_end; i += blockDim.x) {
    A e[Depth];
#pragma unroll
    for (int d = 0; d < Depth; ++d) e[d] = dev::to_acc(base[d][i]);
    local(e);
#pragma unroll
    for (int d = 0; d < Depth; ++d)
      if (Op::kWrites & (1u << d)) base[d][i] = dev::from_acc<T>(e[d]);
    if constexpr (kCopy) copy[i] = dev::from_acc<C>(e[0]);
  }
}

// Lists: 0 params, 1 grads, [2 momentum buffers (with momentum)].
template <class A>
struct SgdOp {
  static constexpr unsigned kWrites = 0b101u;
  dev::SgdRule<A> rule;
  __device__ bool begin_block() { return true; }
  template <int D>
  __device__ void operator()(A (&e)[D]) const {
    if constexpr (D == 3) {
      rule.apply(e[0], e[1], e[2]);
    } else {
      A unused = A(0);
      rule.apply(e[0], e[1], unused);
    }
  }
};

// Lists: 0 params, 1 grads, 2 exp_avg, 3 exp_avg_sq, [4 max_exp_avg_sq (amsgrad)].
// Capturable (scalars set): each block makes the rule from the step count (scalars[0]) and the
// learning rate (scalars[lr_slot]) in GPU memory, so a replayed graph uses the current values.
template <class A>
struct AdamOp {
  static constexpr unsigned kWrites = 0b11101u;
  dev::AdamRule<A> rule;
  const double* scalars = nullptr;
  int64_t lr_slot = 1;
  double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  __device__ bool begin_block() {
    if (scalars)
      rule = dev::make_adam_rule<A>(scalars[lr_slot], beta1, beta2, eps, weight_decay, rule.decoupled, rule.amsgrad,
                                    rule.maximize, scalars[0]);
    return true;
  }
  template <int D>
  __device__ void operator()(A (&e)[D]) const {
    if constexpr (D == 5) {
      rule.apply(e[0], e[1], e[2], e[3], e[4]);
    } else {
      A unused = A(0);
      rule.apply(e[0], e[1], e[2], e[3], unused);
    }
  }
};

// x *= inv_scale; *found = 1 when a result is inf or NaN (many threads may write the same 1).
template <class A>
struct UnscaleOp {
  static constexpr unsigned kWrites = 0b1u;
  A inv_scale;
  int32_t* found;  // 0-d i32 on the device
  __device__ bool begin_block() { return true; }
  __device__ void operator()(A (&e)[1]) const {
    const A v = e[0] * inv_scale;
    if (!dev::is_finite_value(v)) *found = 1;
    e[0] = v;
  }
};

// x *= max_norm / (*norm + 1e-6) when that is below 1; every block reads the norm itself.
template <class A>
struct ClipOp {
  static constexpr unsigned kWrites = 0b1u;
  const double* norm;  // 0-d f64 on the device
  double max_norm;
  A coef = A(1);
  __device__ bool begin_block() {
    const double c = dev::clip_coefficient(max_norm, *norm);
    if (!(c < 1.0)) return false;
    coef = static_cast<A>(c);
    return true;
  }
  __device__ void operator()(A (&e)[1]) const { e[0] = e[0] * coef; }
};

__global__ void count_step_kernel(double* counter) {
  counter[0] += 1.0;
}

// --- reductions --------------------------------------------------------------------------------
// meta: contiguous T tensors; block b reduces its chunk with Op (dev::SumSquaresOp / MaxAbsOp, in
// f64) and writes partials[meta.first_block + b] (`=`).
template <class T, class Op>
__global__ void multi_tensor_reduce_kernel(TensorListMeta<1> meta, double* partials) {
  __shared__ double scratch[dev::kWarp];
  constexpr int W = dev::vec_width<T>;
  const int slot = meta.block_slot[blockIdx.x];
  const dev::ChunkRange r = dev::chunk_range(meta.numel[slot], meta.block_chunk[blockIdx.x], kChunk);
  const T* base = static_cast<const T*>(meta.addr[0][slot]) + r.begin;
  const dev::ChunkSplit s = dev::chunk_split(r, W, dev::is_aligned(base, sizeof(T) * W));
  double acc = Op::identity();
  for (int64_t v = threadIdx.x; v < s.vectors; v += blockDim.x) {
    const dev::AlignedVector<T, W> x = dev::load_vector<T, W>(base, v);
#pragma unroll
    for (int l = 0; l < W; ++l) acc = Op::push(acc, static_cast<double>(dev::to_acc(x.v[l])));
  }
  const int64_t tail_end = s.end - r.begin;
  for (int64_t i = s.tail_begin - r.begin + threadIdx.x; i < tail_end; i += blockDim.x)
    acc = Op::push(acc, static_cast<double>(dev::to_acc(base[i])));
  acc = dev::block_reduce<Op>(acc, scratch);
  if (threadIdx.x == 0) partials[meta.first_block + blockIdx.x] = acc;
}

// One block: partials (n,) -> *out (`=`), thread t combining partials t, t + blockDim, ... then
// the block tree; with take_sqrt the square root of the result.
template <class Op>
__global__ void combine_partials_kernel(const double* partials, int64_t n, double* out, bool take_sqrt) {
  __shared__ double scratch[dev::kWarp];
  double acc = Op::identity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = Op::combine(acc, partials[i]);
  acc = dev::block_reduce<Op>(acc, scratch);
  if (threadIdx.x == 0) *out = take_sqrt ? sqrt(acc) : acc;
}

// --- host side ----------------------------------------------------------------------------------
// Plans and launches the element-wise kernel over Depth lists of equally many T tensors (and, when
// C is not void, the C copies of list 0 in `copies`).
template <class T, int Depth, class Op, class C = void>
void apply_lists(const char* name, const std::array<const std::vector<Tensor>*, Depth>& lists, const Op& op,
                 cudaStream_t stream, const std::vector<Tensor>* copies = nullptr) {
  constexpr int L = Depth + (std::is_void_v<C> ? 0 : 1);
  const std::vector<Tensor>& first = *lists[0];
  dev::plan_multi_tensor<L>(
      static_cast<int64_t>(first.size()), [&](int64_t t) { return first[static_cast<size_t>(t)].numel(); },
      [&](int d, int64_t t) {
        const std::vector<Tensor>& list = d < Depth ? *lists[static_cast<size_t>(d)] : *copies;
        return list[static_cast<size_t>(t)].data_ptr();
      },
      kChunk,
      [&](const TensorListMeta<L>& meta, int blocks, const int64_t*) {
        launch(name, multi_tensor_apply_kernel<T, Depth, Op, C>, dim3(static_cast<unsigned>(blocks)),
               dim3(kOptimThreads), 0, stream, meta, op);
      });
}

// Adam over Depth lists (4, or 5 with amsgrad), with the copies' dtype picked at run time: they
// exist for f32 parameters only (kernels/src/optim.cpp checks).
template <class T, int Depth, class Op>
void apply_adam(const std::array<const std::vector<Tensor>*, Depth>& lists, const Op& op, cudaStream_t stream,
                const std::vector<Tensor>& copies) {
  if constexpr (std::is_same_v<T, float>) {
    if (!copies.empty() && copies[0].dtype() == DType::BF16)
      return apply_lists<T, Depth, Op, BFloat16>("adam_step", lists, op, stream, &copies);
    if (!copies.empty()) return apply_lists<T, Depth, Op, Half>("adam_step", lists, op, stream, &copies);
  }
  apply_lists<T, Depth>("adam_step", lists, op, stream);
}

// The tensors of a list grouped by dtype, groups in order of first appearance.
std::vector<std::vector<Tensor>> by_dtype(const std::vector<Tensor>& ts) {
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& t : ts) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::vector<Tensor>& g) { return g.front().dtype() == t.dtype(); });
    if (it == groups.end()) {
      groups.push_back({t});
    } else {
      it->push_back(t);
    }
  }
  return groups;
}

int64_t list_blocks(const std::vector<Tensor>& ts) {
  return dev::multi_tensor_blocks(
      static_cast<int64_t>(ts.size()), [&](int64_t t) { return ts[static_cast<size_t>(t)].numel(); }, kChunk);
}

template <class Op>
void reduce_lists(const char* name, const std::vector<std::vector<Tensor>>& groups, const Tensor& out, bool take_sqrt,
                  cudaStream_t stream) {
  int64_t total = 0;
  for (const auto& g : groups) total += list_blocks(g);
  Tensor partials = empty({std::max<int64_t>(total, 1)}, DType::F64, out.device());
  double* pp = static_cast<double*>(partials.data_ptr());
  int64_t offset = 0;
  for (const auto& g : groups) {
    visit_float(g.front().dtype(), g.front().device(), name, [&](auto tag) {
      using T = decltype(tag);
      dev::plan_multi_tensor<1>(
          static_cast<int64_t>(g.size()), [&](int64_t t) { return g[static_cast<size_t>(t)].numel(); },
          [&](int, int64_t t) { return g[static_cast<size_t>(t)].data_ptr(); }, kChunk,
          [&](const TensorListMeta<1>& meta, int blocks, const int64_t*) {
            launch(name, multi_tensor_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)), dim3(kOptimThreads), 0,
                   stream, meta, pp + offset);
          });
    });
    offset += list_blocks(g);
  }
  launch(name, combine_partials_kernel<Op>, dim3(1), dim3(kOptimThreads), 0, stream, static_cast<const double*>(pp),
         total, static_cast<double*>(out.data_ptr()), take_sqrt);
  // `partials` goes back to the caching allocator on this stream: reused only by later work here.
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h) {
  if (params.empty()) return;
  OpScope scope("sgd_step", &params[0], &grads[0]);
  const int device = params[0].device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = current_native_stream(device);
  visit_float(params[0].dtype(), params[0].device(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const SgdOp<A> op{
        dev::make_sgd_rule<A>(h.lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, h.maximize, h.first_step)};
    if (h.momentum != 0) {
      apply_lists<T, 3>("sgd_step", {&params, &grads, &momentum_bufs}, op, stream);
    } else {
      apply_lists<T, 2>("sgd_step", {&params, &grads}, op, stream);
    }
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
               const std::vector<Tensor>& copies) {
  if (params.empty()) return;
  OpScope scope("adam_step", &params[0], &grads[0]);
  const int device = params[0].device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = current_native_stream(device);
  visit_float(params[0].dtype(), params[0].device(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    AdamOp<A> op{dev::make_adam_rule<A>(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.decoupled, h.amsgrad,
                                        h.maximize, h.step)};
    if (h.device_scalars.defined()) {
      op.scalars = h.device_scalars.data<double>();
      op.lr_slot = h.lr_slot;
      op.beta1 = h.beta1, op.beta2 = h.beta2, op.eps = h.eps, op.weight_decay = h.weight_decay;
    }
    if (h.amsgrad) {
      apply_adam<T, 5>({&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}, op, stream, copies);
    } else {
      apply_adam<T, 4>({&params, &grads, &exp_avgs, &exp_avg_sqs}, op, stream, copies);
    }
  });
}

void reduce_norm(const std::vector<Tensor>& tensors, NormReduction what, const Tensor& out) {
  const char* name = what == NormReduction::MaxAbs ? "max_abs" : "sum_of_squares";
  OpScope scope(name, &out);
  const int device = out.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = current_native_stream(device);
  const auto groups = by_dtype(tensors);
  if (what == NormReduction::MaxAbs) {
    reduce_lists<dev::MaxAbsOp>(name, groups, out, false, stream);
  } else {
    reduce_lists<dev::SumSquaresOp>(name, groups, out, what == NormReduction::Norm2, stream);
  }
}

void count_step(const Tensor& counter) {
  OpScope scope("count_step_", &counter);
  const int device = counter.device().index;
  brisk::cuda::DeviceGuard guard(device);
  launch("count_step_kernel", count_step_kernel, dim3(1), dim3(1), 0, current_native_stream(device),
         counter.data<double>());
}

void clip_grads_with_norm(const std::vector<Tensor>& tensors, double max_norm, const Tensor& norm) {
  if (tensors.empty()) return;
  OpScope scope("clip_grads_with_norm_", &tensors[0], &norm);
  const int device = norm.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = current_native_stream(device);
  const double* pn = static_cast<const double*>(norm.data_ptr());
  for (const auto& g : by_dtype(tensors)) {
    visit_float(g.front().dtype(), g.front().device(), "clip_grads_with_norm_", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      apply_lists<T, 1>("clip_grads_with_norm_", {&g}, ClipOp<A>{pn, max_norm}, stream);
    });
  }
}

void unscale_and_check(const std::vector<Tensor>& grads, double inv_scale, const Tensor& found) {
  OpScope scope("unscale_and_check_", grads.empty() ? nullptr : &grads[0]);
  const int device = found.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = current_native_stream(device);
  int32_t* flag = static_cast<int32_t*>(found.data_ptr());
  brisk::cuda::detail::memset_async(flag, 0, sizeof(int32_t), stream);
  for (const auto& g : by_dtype(grads)) {
    visit_float(g.front().dtype(), g.front().device(), "unscale_and_check_", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      apply_lists<T, 1>("unscale_and_check_", {&g}, UnscaleOp<A>{static_cast<A>(inv_scale), flag}, stream);
    });
  }
}

}  // namespace brisk::kernels::cuda
