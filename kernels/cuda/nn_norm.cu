// CUDA layer norm forward and batch norm, forward and backward. Layer norm: rows held on chip
// (row_cache.cuh) when they fit, else a group of threads per row (device/nn.h's RowPlan), Welford
// statistics combined in the block tree, 128-bit loads when rows are aligned; its backward is in
// nn_layer_norm_backward.cu. Batch norm: each channel is cut into chunks (device/nn.h's
// ChannelChunks), a block per chunk, and a second kernel combines a channel's chunks in order.
// Statistics are f32 (f64 for f64 data); results do not depend on timing.
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/index.h"
#include "brisk/kernels/device/nn.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/nn.h"
#include "cuda/nn_common.cuh"
#include "cuda/row_cache.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
namespace dv = brisk::kernels::device;
using nn_common::cptr;
using nn_common::inv_sqrt;
using nn_common::kMaxRowsPerBlock;
using nn_common::mptr;

// --- layer norm --------------------------------------------------------------------------------

// x, y: (R, D) contiguous; weight, bias: (D) or null; mean, rstd: (R), `=`. Blocks of
// (threads_per_row, rows_per_block); each row group of the grid-stride loop is reduced by the
// whole block (every thread reaches every __syncthreads, rows past R contribute nothing).
// Add (add_layer_norm): the row normalised is h = x + residual (row_cache::add_pieces), written
// to h (R, D) by the first pass and read back by the second (each thread its own elements).
// Without Add, residual and h are null.
template <int W, class T, bool Add>
__global__ void __launch_bounds__(dv::kMaxRowThreads)
    layer_norm_kernel(int64_t R, int64_t D, const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ h,
                      const T* __restrict__ weight, const T* __restrict__ bias, acc_t<T> eps, T* __restrict__ y,
                      acc_t<T>* __restrict__ mean, acc_t<T>* __restrict__ rstd) {
  using A = acc_t<T>;
  using Op = dv::WelfordOp<A>;
  __shared__ dv::WelfordState<A> scratch[kMaxRowsPerBlock][dv::kWarp];
  __shared__ A row_mean[kMaxRowsPerBlock], row_rstd[kMaxRowsPerBlock];
  const int tx = threadIdx.x, ty = threadIdx.y, tpr = blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y; first < R;
       first += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t r = first + ty;
    const bool active = r < R;
    const int64_t base = (active ? r : 0) * D;
    const T* xr = x + base;
    dv::WelfordState<A> st = Op::identity();
    if (active) {
      dv::for_each_owned<W>(
          D, tx, tpr,
          [&](int64_t v) {
            auto a = dv::load_vector<T, W>(xr, v);
            if constexpr (Add) {
              a = row_cache::add_pieces<T, W>(a, dv::load_vector<T, W>(residual + base, v));
              dv::store_vector<T, W>(h + base, v, a);
            }
#pragma unroll
            for (int l = 0; l < W; ++l) st = Op::push(st, dv::to_acc(a.v[l]));
          },
          [&](int64_t j) {
            T xv = xr[j];
            if constexpr (Add) {
              xv = dv::from_acc<T>(dv::to_acc(xv) + dv::to_acc(residual[base + j]));
              h[base + j] = xv;
            }
            st = Op::push(st, dv::to_acc(xv));
          });
    }
    if constexpr (Add) xr = h + base;  // the second pass reads back this thread's own h
    st = dv::block_reduce<Op>(st, scratch[ty]);
    if (tx == 0) {
      row_mean[ty] = st.mean;
      row_rstd[ty] = inv_sqrt(st.m2 / static_cast<A>(D) + eps);
      if (active) {
        mean[r] = row_mean[ty];
        rstd[r] = row_rstd[ty];
      }
    }
    __syncthreads();
    if (active) {
      const A mu = row_mean[ty], rs = row_rstd[ty];
      T* yr = y + r * D;
      auto value = [&](int64_t j, T xv) {
        A v = (dv::to_acc(xv) - mu) * rs;
        if (weight) v *= dv::to_acc(weight[j]);
        if (bias) v += dv::to_acc(bias[j]);
        return dv::from_acc<T>(v);
      };
      dv::map_owned<W>(D, tx, tpr, xr, yr, value);
    }
    __syncthreads();  // row_mean/row_rstd are rewritten by the next row group
  }
}

// The sum of v over the row's lanes, in every lane (nn_common::row_reduce).
template <class A>
__device__ inline A row_sum(A v, A* scratch, A* total) {
  return nn_common::row_reduce<dv::SumOp<A>>(v, scratch, total);
}

// y = (x - mean) * rstd (* weight + bias) over the pieces this lane holds (first element `at` of
// the row's part in `c`, whose element 0 is the row's element `offset`, a multiple of W).
// affine_vectors: weight and bias (where defined) are 16-byte aligned and read a vector at a time
// (the same values, so the same bits as W scalar reads; a quarter of the load instructions for
// f32, and whole 16-byte pieces where rows too long for the L1 cache read them from L2).
template <int W, class T, bool Shared>
__device__ inline void layer_norm_write(const row_cache::RowCache<T, W, Shared>& c, int64_t offset, acc_t<T> mu,
                                        acc_t<T> rs, bool affine_vectors, const T* __restrict__ weight,
                                        const T* __restrict__ bias, T* __restrict__ yr) {
  using A = acc_t<T>;
  using Vec = dv::AlignedVector<T, W>;
  c.for_each([&](int64_t i, const Vec& v) {
    Vec wv, bv;
    const int64_t at = offset + i;
    if (affine_vectors) {
      if (weight) wv = dv::load_vector<T, W>(weight, at / W);
      if (bias) bv = dv::load_vector<T, W>(bias, at / W);
    } else {
#pragma unroll
      for (int l = 0; l < W; ++l) {
        if (weight) wv.v[l] = weight[at + l];
        if (bias) bv.v[l] = bias[at + l];
      }
    }
    Vec o;
#pragma unroll
    for (int l = 0; l < W; ++l) {
      A val = (dv::to_acc(v.v[l]) - mu) * rs;
      if (weight) val *= dv::to_acc(wv.v[l]);
      if (bias) val += dv::to_acc(bv.v[l]);
      o.v[l] = dv::from_acc<T>(val);
    }
    *reinterpret_cast<Vec*>(yr + i) = o;
  });
}

// The same with each row held on chip (row_cache.cuh) while its mean, then its variance
// (sum((x - mean)^2) / D, from the held copy), then y are computed: x is read once. D a
// multiple of W, x and y 16-byte aligned. Blocks of (lanes, rows_per_block) with a warp per row
// for rows of up to 8 pieces per lane, or (kSharedLanes, 1) when Shared.
template <int W, class T, bool Shared, bool Add>
__global__ void __launch_bounds__(Shared ? row_cache::kSharedLanes : row_cache::kMaxRegisterThreads)
    layer_norm_held_kernel(int64_t R, int64_t D, bool affine_vectors, const T* __restrict__ x,
                           const T* __restrict__ residual, T* __restrict__ h, const T* __restrict__ weight,
                           const T* __restrict__ bias, acc_t<T> eps, T* __restrict__ y, acc_t<T>* __restrict__ mean,
                           acc_t<T>* __restrict__ rstd) {
  using A = acc_t<T>;
  using Vec = dv::AlignedVector<T, W>;
  __shared__ A scratch[kMaxRowsPerBlock][dv::kWarp];
  __shared__ A total[kMaxRowsPerBlock];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y; first < R;
       first += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t r = first + ty;
    const bool active = r < R;
    row_cache::RowCache<T, W, Shared> c;
    c.pieces = active ? D / W : 0;
    c.lane = tx;
    c.lanes = static_cast<int>(blockDim.x);
    if constexpr (Shared) c.smem = reinterpret_cast<Vec*>(row_cache::dynamic_smem());
    if (active) {
      if constexpr (Add)
        c.load_sum(x + r * D, residual + r * D, h + r * D);
      else
        c.load(x + r * D);
    }
    A s = A(0);
    c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
      for (int l = 0; l < W; ++l) s += dv::to_acc(v.v[l]);
    });
    const A mu = row_sum(s, scratch[ty], &total[ty]) / static_cast<A>(D);
    A q = A(0);
    c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
      for (int l = 0; l < W; ++l) {
        const A d = dv::to_acc(v.v[l]) - mu;
        q += d * d;
      }
    });
    const A rs = inv_sqrt(row_sum(q, scratch[ty], &total[ty]) / static_cast<A>(D) + eps);
    if (!active) continue;
    if (tx == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    layer_norm_write<W, T, Shared>(c, 0, mu, rs, affine_vectors, weight, bias, y + r * D);
  }
}

// Rows too long for one block: a cluster of blocks per row (grid.x = R * cluster), block k
// holding pieces [k * chunk, (k + 1) * chunk) in registers. Each block computes its chunk's mean
// and sum of squared deviations from the held values; the blocks' (mean, m2, count) are merged
// with Chan's formula over the cluster in rank order (row_cache::cluster_combine), one exchange
// per row; `split`: its second barrier overlaps the writes (row_cache::split_barrier_enabled).
template <int W, class T, bool Add>
__global__ void __launch_bounds__(row_cache::kClusterLanes, row_cache::kClusterBlocksPerSm)
    layer_norm_cluster_kernel(int64_t D, int64_t chunk, bool split, bool affine_vectors, const T* __restrict__ x,
                              const T* __restrict__ residual, T* __restrict__ h, const T* __restrict__ weight,
                              const T* __restrict__ bias, acc_t<T> eps, T* __restrict__ y, acc_t<T>* __restrict__ mean,
                              acc_t<T>* __restrict__ rstd) {
  using A = acc_t<T>;
  using Vec = dv::AlignedVector<T, W>;
  __shared__ A scratch[dv::kWarp];
  __shared__ A total;
  __shared__ dv::WelfordState<A> slot;
  const unsigned rank = row_cache::cluster_rank(), blocks = row_cache::cluster_size();
  const int64_t r = static_cast<int64_t>(blockIdx.x) / blocks;
  const int64_t first = static_cast<int64_t>(rank) * chunk, pieces = D / W;
  row_cache::RowCache<T, W, false> c;
  c.pieces = std::max<int64_t>(0, std::min(chunk, pieces - first));
  c.lane = static_cast<int>(threadIdx.x);
  c.lanes = static_cast<int>(blockDim.x);
  const int64_t at = r * D + first * W;
  if constexpr (Add)
    c.load_sum(x + at, residual + at, h + at);
  else
    c.load(x + at);
  const A count = static_cast<A>(c.pieces * W);
  A s = A(0);
  c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
    for (int l = 0; l < W; ++l) s += dv::to_acc(v.v[l]);
  });
  s = row_sum(s, scratch, &total);
  const A local_mean = count > A(0) ? s / count : A(0);
  A q = A(0);
  c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
    for (int l = 0; l < W; ++l) {
      const A d = dv::to_acc(v.v[l]) - local_mean;
      q += d * d;
    }
  });
  q = row_sum(q, scratch, &total);
  const dv::WelfordState<A> st =
      row_cache::cluster_combine<dv::WelfordOp<A>>(dv::WelfordState<A>{local_mean, q, count}, &slot, split);
  const A mu = st.mean, rs = inv_sqrt(st.m2 / static_cast<A>(D) + eps);
  if (rank == 0 && threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
  layer_norm_write<W, T, false>(c, first * W, mu, rs, affine_vectors, weight, bias, y + r * D + first * W);
  row_cache::cluster_release(split);
}

// --- batch norm --------------------------------------------------------------------------------

// The element offset of element e of channel c in x: (N, C, S).
__device__ __forceinline__ int64_t channel_offset(int64_t e, int64_t c, int64_t C, int64_t S,
                                                  const dv::IndexDiv& s_div) {
  int64_t n, s;
  s_div.divmod(e, n, s);
  return (n * C + c) * S + s;
}

// Block b = c * chunks + k (kChannelThreads threads): Welford state of chunk k of channel c into
// part[b], `=`.
template <class T>
__global__ void batch_norm_stats_kernel(int64_t C, int64_t S, int64_t M, dv::ChannelChunks cc, dv::IndexDiv s_div,
                                        const T* __restrict__ x, dv::WelfordState<acc_t<T>>* __restrict__ part) {
  using A = acc_t<T>;
  using Op = dv::WelfordOp<A>;
  __shared__ dv::WelfordState<A> scratch[dv::kWarp];
  const int64_t c = blockIdx.x / cc.chunks, k = blockIdx.x % cc.chunks;
  dv::WelfordState<A> st = Op::identity();
  dv::for_each_chunk_element(cc, M, k, threadIdx.x,
                             [&](int64_t e) { st = Op::push(st, dv::to_acc(x[channel_offset(e, c, C, S, s_div)])); });
  st = dv::block_reduce<Op>(st, scratch);
  if (threadIdx.x == 0) part[blockIdx.x] = st;
}

// One thread per channel: combines its chunks in order into save_mean / save_invstd (`=`) and
// updates the running statistics (null when not tracked) in place.
template <class T>
__global__ void batch_norm_finish_kernel(int64_t C, int64_t chunks, int64_t M,
                                         const dv::WelfordState<acc_t<T>>* __restrict__ part, acc_t<T> eps,
                                         acc_t<T> momentum, T* __restrict__ running_mean, T* __restrict__ running_var,
                                         acc_t<T>* __restrict__ save_mean, acc_t<T>* __restrict__ save_invstd) {
  using A = acc_t<T>;
  using Op = dv::WelfordOp<A>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += step) {
    dv::WelfordState<A> st = Op::identity();
    for (int64_t k = 0; k < chunks; ++k) st = Op::combine(st, part[c * chunks + k]);
    const A mu = st.mean, var = st.m2 / static_cast<A>(M);
    save_mean[c] = mu;
    save_invstd[c] = inv_sqrt(var + eps);
    if (running_mean) {
      const A m = momentum;
      running_mean[c] = dv::from_acc<T>(dv::to_acc(running_mean[c]) * (A(1) - m) + m * mu);
      const A unbiased = var * (static_cast<A>(M) / static_cast<A>(M - 1));
      running_var[c] = dv::from_acc<T>(dv::to_acc(running_var[c]) * (A(1) - m) + m * unbiased);
    }
  }
}

// Eval: one thread per channel, save_mean = running_mean, save_invstd = 1 / sqrt(running_var + eps).
template <class T>
__global__ void batch_norm_eval_stats_kernel(int64_t C, const T* __restrict__ running_mean,
                                             const T* __restrict__ running_var, acc_t<T> eps,
                                             acc_t<T>* __restrict__ save_mean, acc_t<T>* __restrict__ save_invstd) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += step) {
    save_mean[c] = dv::to_acc(running_mean[c]);
    save_invstd[c] = inv_sqrt(dv::to_acc(running_var[c]) + eps);
  }
}

// x, y: (N, C, S); element i is in channel (i / S) % C. y = (x - mean) * invstd * weight + bias.
template <class T>
__global__ void batch_norm_apply_kernel(int64_t total, dv::IndexDiv s_div, dv::IndexDiv c_div, const T* __restrict__ x,
                                        const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ invstd,
                                        const T* __restrict__ weight, const T* __restrict__ bias, T* __restrict__ y) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t q, s, n, c;
    s_div.divmod(i, q, s);
    c_div.divmod(q, n, c);
    const A w = weight ? dv::to_acc(weight[c]) : A(1), b = bias ? dv::to_acc(bias[c]) : A(0);
    y[i] = dv::from_acc<T>((dv::to_acc(x[i]) - mean[c]) * invstd[c] * w + b);
  }
}

// Block b = c * chunks + k: part[b] = (sum(grad), sum(grad * xhat)) over chunk k of channel c.
template <class T>
__global__ void batch_norm_grad_stats_kernel(int64_t C, int64_t S, int64_t M, dv::ChannelChunks cc, dv::IndexDiv s_div,
                                             const T* __restrict__ grad, const T* __restrict__ x,
                                             const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ invstd,
                                             dv::Pair<acc_t<T>>* __restrict__ part) {
  using A = acc_t<T>;
  using Op = dv::PairSumOp<A>;
  __shared__ dv::Pair<A> scratch[dv::kWarp];
  const int64_t c = blockIdx.x / cc.chunks, k = blockIdx.x % cc.chunks;
  const A mu = mean[c], is = invstd[c];
  dv::Pair<A> p = Op::identity();
  dv::for_each_chunk_element(cc, M, k, threadIdx.x, [&](int64_t e) {
    const int64_t i = channel_offset(e, c, C, S, s_div);
    const A g = dv::to_acc(grad[i]);
    p.a += g;
    p.b += g * (dv::to_acc(x[i]) - mu) * is;
  });
  p = dv::block_reduce<Op>(p, scratch);
  if (threadIdx.x == 0) part[blockIdx.x] = p;
}

// One thread per channel: sums[c] = its chunks' sums in order; dweight = sum(grad * xhat),
// dbias = sum(grad) (null when not asked for), `=`.
template <class T>
__global__ void batch_norm_grad_finish_kernel(int64_t C, int64_t chunks, const dv::Pair<acc_t<T>>* __restrict__ part,
                                              dv::Pair<acc_t<T>>* __restrict__ sums, T* __restrict__ dweight,
                                              T* __restrict__ dbias) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += step) {
    dv::Pair<A> p = dv::PairSumOp<A>::identity();
    for (int64_t k = 0; k < chunks; ++k) p = dv::PairSumOp<A>::combine(p, part[c * chunks + k]);
    sums[c] = p;
    if (dweight) dweight[c] = dv::from_acc<T>(p.b);
    if (dbias) dbias[c] = dv::from_acc<T>(p.a);
  }
}

// dx: (N, C, S), `=`. Training: k * (g - mean(g) - xhat * mean(g * xhat)); eval: k * g; k = w * invstd.
template <class T>
__global__ void batch_norm_dx_kernel(int64_t total, int64_t M, bool training, dv::IndexDiv s_div, dv::IndexDiv c_div,
                                     const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ weight,
                                     const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ invstd,
                                     const dv::Pair<acc_t<T>>* __restrict__ sums, T* __restrict__ dx) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t q, s, n, c;
    s_div.divmod(i, q, s);
    c_div.divmod(q, n, c);
    const A is = invstd[c];
    const A k = (weight ? dv::to_acc(weight[c]) : A(1)) * is;
    const A g = dv::to_acc(grad[i]);
    if (training) {
      const A mg = sums[c].a / static_cast<A>(M), mgx = sums[c].b / static_cast<A>(M);
      dx[i] = dv::from_acc<T>(k * (g - mg - (dv::to_acc(x[i]) - mean[c]) * is * mgx));
    } else {
      dx[i] = dv::from_acc<T>(k * g);
    }
  }
}

unsigned channel_blocks(int64_t C) {
  return rt::blocks_for(C, 128);
}

// BRISK_CUDA_LN_VECTOR_AFFINE=0 (read at each call) reads weight and bias an element at a time in
// the held-row kernels, as before, to time one against the other.
bool affine_vectors_enabled() {
  return brisk::envvar::get_bool("BRISK_CUDA_LN_VECTOR_AFFINE", true);
}

// layer_norm's launches (Add false; residual and h undefined) and add_layer_norm's (Add true): the
// same plan over the same kernels, so add_layer_norm's y, mean and rstd are bit for bit
// layer_norm's on h whenever both take the same path (the same pieces per row and alignment:
// x and residual 16-byte aligned, as h is).
template <bool Add>
void launch_layer_norm(const char* name, const Tensor& x, const Tensor& residual, const Tensor& h, const Tensor& weight,
                       const Tensor& bias, double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  OpScope scope(name, &x, &weight, &bias);
  const int64_t R = mean.numel(), D = R ? x.numel() / R : 0;
  if (R == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  visit_float(x.dtype(), x.device(), name, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const auto l = nn_common::row_launch(R, D, sizeof(T),
                                         {x.data_ptr(), residual.defined() ? residual.data_ptr() : nullptr,
                                          h.defined() ? h.data_ptr() : nullptr, y.data_ptr()},
                                         device);
    auto go = [&](auto kernel, dim3 grid, dim3 block, size_t smem, auto... lead) {
      rt::launch(name, kernel, grid, block, smem, stream, lead..., cptr<T>(x), cptr<T>(residual), mptr<T>(h),
                 cptr<T>(weight), cptr<T>(bias), static_cast<A>(eps), mptr<T>(y), mptr<A>(mean), mptr<A>(rstd));
    };
    constexpr int W = dv::vec_width<T>;
    const int64_t pieces = l.vectorized ? D / W : 0;
    // Held rows get their own lanes: a warp per row up to 8 pieces per lane, else enough lanes
    // for 8 pieces each (at most kMaxRegisterThreads).
    int lanes = dv::kWarp;
    while (lanes < row_cache::kMaxRegisterThreads && int64_t{lanes} * row_cache::kRowRegisterPieces < pieces)
      lanes *= 2;
    const row_cache::HoldPlan hp = row_cache::plan_hold(pieces, lanes, sizeof(dv::AlignedVector<T, W>), device);
    const bool affine_vectors = hp.hold != row_cache::Hold::None && affine_vectors_enabled() &&
                                (!weight.defined() || dv::is_aligned(weight.data_ptr(), dv::kVecBytes)) &&
                                (!bias.defined() || dv::is_aligned(bias.data_ptr(), dv::kVecBytes));
    if (hp.hold == row_cache::Hold::Registers) {
      const int rows_per_block = std::max(1, 256 / lanes);
      const int64_t groups = (R + rows_per_block - 1) / rows_per_block;
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(groups, int64_t{rt::multiprocessor_count(device)} * 64)));
      go(layer_norm_held_kernel<W, T, false, Add>, grid,
         dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows_per_block)), 0, R, D, affine_vectors);
    } else if (hp.hold == row_cache::Hold::Cluster) {
      rt::launch_clusters(name, layer_norm_cluster_kernel<W, T, Add>, dim3(static_cast<unsigned>(R * hp.cluster)),
                          dim3(row_cache::kClusterLanes), hp.cluster, stream, D, hp.chunk_pieces,
                          row_cache::split_barrier_enabled(), affine_vectors, cptr<T>(x), cptr<T>(residual), mptr<T>(h),
                          cptr<T>(weight), cptr<T>(bias), static_cast<A>(eps), mptr<T>(y), mptr<A>(mean),
                          mptr<A>(rstd));
    } else if (hp.hold == row_cache::Hold::Shared) {
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(R, int64_t{rt::multiprocessor_count(device)} * 8)));
      go(layer_norm_held_kernel<W, T, true, Add>, grid, dim3(row_cache::kSharedLanes), hp.smem_bytes, R, D,
         affine_vectors);
    } else if (l.vectorized) {
      go(layer_norm_kernel<W, T, Add>, l.grid, l.block, 0, R, D);
    } else {
      go(layer_norm_kernel<1, T, Add>, l.grid, l.block, 0, R, D);
    }
  });
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  launch_layer_norm<false>("layer_norm", x, Tensor(), Tensor(), weight, bias, eps, y, mean, rstd);
}

void add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                    const Tensor& h, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  launch_layer_norm<true>("add_layer_norm", x, residual, h, weight, bias, eps, y, mean, rstd);
}

void batch_norm(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight, const Tensor& bias,
                const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, double eps,
                const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  OpScope scope("batch_norm", &x, &weight, &running_mean);
  if (C == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const int64_t M = N * S, total = M * C;
  visit_float(x.dtype(), x.device(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    if (training) {
      const dv::ChannelChunks cc = dv::channel_chunks(M);
      // Welford states (mean, m2, count) as 3 values of A each.
      Tensor part = empty({C * cc.chunks * 3}, dtype_of_v<A>, x.device());
      auto* pp = static_cast<dv::WelfordState<A>*>(part.data_ptr());
      rt::launch("batch_norm_stats", batch_norm_stats_kernel<T>, dim3(static_cast<unsigned>(C * cc.chunks)),
                 dim3(dv::kChannelThreads), 0, stream, C, S, M, cc, dv::IndexDiv(S, M), cptr<T>(x), pp);
      rt::launch("batch_norm_finish", batch_norm_finish_kernel<T>, dim3(channel_blocks(C)), dim3(128), 0, stream, C,
                 cc.chunks, M, static_cast<const dv::WelfordState<A>*>(pp), static_cast<A>(eps),
                 static_cast<A>(momentum), mptr<T>(running_mean), mptr<T>(running_var), mptr<A>(save_mean),
                 mptr<A>(save_invstd));
    } else {
      rt::launch("batch_norm_eval_stats", batch_norm_eval_stats_kernel<T>, dim3(channel_blocks(C)), dim3(128), 0,
                 stream, C, cptr<T>(running_mean), cptr<T>(running_var), static_cast<A>(eps), mptr<A>(save_mean),
                 mptr<A>(save_invstd));
    }
    if (total == 0) return;
    rt::launch("batch_norm_apply", batch_norm_apply_kernel<T>, dim3(nn_common::grid_for(total, device)), dim3(256), 0,
               stream, total, dv::IndexDiv(S, total), dv::IndexDiv(C, total / S), cptr<T>(x), cptr<A>(save_mean),
               cptr<A>(save_invstd), cptr<T>(weight), cptr<T>(bias), mptr<T>(y));
  });
}

void batch_norm_backward(const Tensor& grad, const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias) {
  OpScope scope("batch_norm backward", &grad, &x, &weight);
  if (C == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const int64_t M = N * S, total = M * C;
  visit_float(x.dtype(), x.device(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const dv::ChannelChunks cc = dv::channel_chunks(M);
    // Per-chunk partials, then per-channel sums: (sum(g), sum(g * xhat)) as 2 values of A each.
    Tensor work = empty({(C * cc.chunks + C) * 2}, dtype_of_v<A>, x.device());
    auto* part = static_cast<dv::Pair<A>*>(work.data_ptr());
    dv::Pair<A>* sums = part + C * cc.chunks;
    rt::launch("batch_norm_grad_stats", batch_norm_grad_stats_kernel<T>, dim3(static_cast<unsigned>(C * cc.chunks)),
               dim3(dv::kChannelThreads), 0, stream, C, S, M, cc, dv::IndexDiv(S, M), cptr<T>(grad), cptr<T>(x),
               cptr<A>(save_mean), cptr<A>(save_invstd), part);
    rt::launch("batch_norm_grad_finish", batch_norm_grad_finish_kernel<T>, dim3(channel_blocks(C)), dim3(128), 0,
               stream, C, cc.chunks, static_cast<const dv::Pair<A>*>(part), sums, mptr<T>(dweight), mptr<T>(dbias));
    if (!dx.defined() || total == 0) return;
    rt::launch("batch_norm_dx", batch_norm_dx_kernel<T>, dim3(nn_common::grid_for(total, device)), dim3(256), 0, stream,
               total, M, training, dv::IndexDiv(S, total), dv::IndexDiv(C, total / S), cptr<T>(grad), cptr<T>(x),
               cptr<T>(weight), cptr<A>(save_mean), cptr<A>(save_invstd), static_cast<const dv::Pair<A>*>(sums),
               mptr<T>(dx));
  });
}

}  // namespace brisk::kernels::cuda
