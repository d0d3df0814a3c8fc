// CUDA layer norm backward (layer_norm's and add_layer_norm's). By default one row kernel reads
// grad and x once for both dx and the weight and bias sums: each lane keeps the sums of the
// columns it owns in registers over its chunk of rows, the chunk's row groups add theirs in order
// into one partial per chunk, and a second kernel adds the chunks in order (device/nn.h's
// FusedNormPlan). BRISK_CUDA_FUSED_LN_BACKWARD=0 (read at each call), or rows too long for the
// registers, run the split kernels instead: dx in one row kernel, then the column sums over chunks
// of rows read grad and x again, and a serial pass per column adds the chunks. Never atomics: the
// same shape gives the same bits.
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/nn.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/util/env.h"
#include "cuda/nn.h"
#include "cuda/nn_common.cuh"
#include "cuda/row_cache.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
namespace dv = brisk::kernels::device;
using nn_common::cptr;
using nn_common::kMaxRowsPerBlock;
using nn_common::mptr;

// --- the split kernels ---------------------------------------------------------------------------

// a + b rounded once, never contracted with a product before it into an FMA (as `a + b` may be),
// so it rounds as the separate add kernel does.
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}

// grad, x, dx: (R, D); weight: (D) or null; mean, rstd: (R). dx = rstd * (gh - mean(gh) -
// xhat * mean(gh * xhat)) with gh = grad * weight, `=`. AddH (add_layer_norm's backward, x is
// h): dx = grad_h + that, the latter rounded to T first, then the sum in acc_t<T> rounded once,
// as the autograd engine adds h's two gradients; without AddH, grad_h is null (and is not read).
template <int W, class T, bool AddH>
__global__ void __launch_bounds__(dv::kMaxRowThreads)
    layer_norm_dx_kernel(int64_t R, int64_t D, const T* __restrict__ grad, const T* __restrict__ grad_h,
                         const T* __restrict__ x, const T* __restrict__ weight, const acc_t<T>* __restrict__ mean,
                         const acc_t<T>* __restrict__ rstd, T* __restrict__ dx) {
  using A = acc_t<T>;
  using Op = dv::PairSumOp<A>;
  __shared__ dv::Pair<A> scratch[kMaxRowsPerBlock][dv::kWarp];
  __shared__ A row_s1[kMaxRowsPerBlock], row_s2[kMaxRowsPerBlock];
  const int tx = threadIdx.x, ty = threadIdx.y, tpr = blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y; first < R;
       first += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t r = first + ty;
    const bool active = r < R;
    const int64_t base = (active ? r : 0) * D;
    const T* gr = grad + base;
    const T* xr = x + base;
    const A mu = active ? mean[r] : A(0), rs = active ? rstd[r] : A(0);
    auto gh_at = [&](int64_t j, T g) { return dv::to_acc(g) * (weight ? dv::to_acc(weight[j]) : A(1)); };
    dv::Pair<A> p = Op::identity();
    if (active) {
      auto add = [&](int64_t j, T g, T xv) {
        const A gh = gh_at(j, g);
        p.a += gh;
        p.b += gh * ((dv::to_acc(xv) - mu) * rs);
      };
      dv::for_each_owned<W>(
          D, tx, tpr,
          [&](int64_t v) {
            const auto ga = dv::load_vector<T, W>(gr, v);
            const auto xa = dv::load_vector<T, W>(xr, v);
#pragma unroll
            for (int l = 0; l < W; ++l) add(v * W + l, ga.v[l], xa.v[l]);
          },
          [&](int64_t j) { add(j, gr[j], xr[j]); });
    }
    p = dv::block_reduce<Op>(p, scratch[ty]);
    if (tx == 0) {
      row_s1[ty] = p.a / static_cast<A>(D);
      row_s2[ty] = p.b / static_cast<A>(D);
    }
    __syncthreads();
    if (active) {
      const A s1 = row_s1[ty], s2 = row_s2[ty];
      T* dr = dx + base;
      auto value = [&](int64_t j, T g, T xv) {
        const A xh = (dv::to_acc(xv) - mu) * rs;
        const T d = dv::from_acc<T>(rs * (gh_at(j, g) - s1 - xh * s2));
        if constexpr (AddH)  // an add nvcc never contracts with the product above into an FMA
          return dv::from_acc<T>(add_rn(dv::to_acc(d), dv::to_acc(grad_h[base + j])));
        else
          return d;
      };
      dv::for_each_owned<W>(
          D, tx, tpr,
          [&](int64_t v) {
            const auto ga = dv::load_vector<T, W>(gr, v);
            const auto xa = dv::load_vector<T, W>(xr, v);
            dv::AlignedVector<T, W> o;
#pragma unroll
            for (int l = 0; l < W; ++l) o.v[l] = value(v * W + l, ga.v[l], xa.v[l]);
            dv::store_vector<T, W>(dr, v, o);
          },
          [&](int64_t j) { dr[j] = value(j, gr[j], xr[j]); });
    }
    __syncthreads();
  }
}

// First kernel of dweight/dbias: block (kColumnTile, kColumnLanes) over (column tile
// blockIdx.x, chunk blockIdx.y); part_w/part_b: (chunks, D), `=`: the chunk's sums of
// grad * xhat and grad per column.
template <class T>
__global__ void layer_norm_columns_kernel(int64_t R, int64_t D, dv::ColumnChunks cc, const T* __restrict__ grad,
                                          const T* __restrict__ x, const acc_t<T>* __restrict__ mean,
                                          const acc_t<T>* __restrict__ rstd, acc_t<T>* __restrict__ part_w,
                                          acc_t<T>* __restrict__ part_b) {
  using A = acc_t<T>;
  __shared__ A sw[dv::kColumnLanes][dv::kColumnTile], sb[dv::kColumnLanes][dv::kColumnTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * dv::kColumnTile + tx, chunk = blockIdx.y;
  A aw = 0, ab = 0;
  if (col < D) {
    dv::for_each_chunk_row(cc, R, chunk, ty, [&](int64_t r) {
      const A g = dv::to_acc(grad[r * D + col]);
      aw += g * (dv::to_acc(x[r * D + col]) - mean[r]) * rstd[r];
      ab += g;
    });
  }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && col < D) {
    A tw = 0, tb = 0;
    for (int l = 0; l < dv::kColumnLanes; ++l) {
      tw += sw[l][tx];
      tb += sb[l][tx];
    }
    part_w[chunk * D + col] = tw;
    part_b[chunk * D + col] = tb;
  }
}

// Second kernel: one thread per column adds the chunks' partials in chunk order; dweight,
// dbias: (D) or null, `=`.
template <class T>
__global__ void layer_norm_columns_finish_kernel(int64_t D, int64_t chunks, const acc_t<T>* __restrict__ part_w,
                                                 const acc_t<T>* __restrict__ part_b, T* __restrict__ dweight,
                                                 T* __restrict__ dbias) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < D; col += step) {
    A tw = 0, tb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      tw += part_w[k * D + col];
      tb += part_b[k * D + col];
    }
    if (dweight) dweight[col] = dv::from_acc<T>(tw);
    if (dbias) dbias[col] = dv::from_acc<T>(tb);
  }
}

// --- one pass: dx and the chunks' weight sums ----------------------------------------------------

// The sums of (grad * weight) and (grad * weight * xhat) over a row's lanes, in every lane
// (nn_common::row_reduce; every thread of the block calls it).
template <class A>
__device__ inline dv::Pair<A> row_pair_sum(dv::Pair<A> v, dv::Pair<A>* scratch, dv::Pair<A>* total) {
  return nn_common::row_reduce<dv::PairSumOp<A>>(v, scratch, total);
}

// grad, x, dx: (R, D); grad_h: (R, D) when AddH (added to dx as in layer_norm_dx_kernel), else
// null; weight: (D) or null; mean, rstd: (R); part_w, part_b: (chunks, D), `=`: chunk b's sums
// of grad * xhat and grad per column. Block (plan.lanes, plan.rows_per_block), one per chunk;
// x, grad, grad_h, dx and weight 16-byte aligned when W > 1, D a multiple of W. Dynamic shared
// memory: 2 * D values of acc_t<T> when rows_per_block > 1 (the groups' ordered sum).
template <int W, class T, bool AddH>
__global__ void __launch_bounds__(dv::kMaxRowThreads)
    layer_norm_backward_fused_kernel(int64_t R, int64_t D, dv::FusedNormPlan plan, const T* __restrict__ grad,
                                     const T* __restrict__ grad_h, const T* __restrict__ x,
                                     const T* __restrict__ weight, const acc_t<T>* __restrict__ mean,
                                     const acc_t<T>* __restrict__ rstd, T* __restrict__ dx,
                                     acc_t<T>* __restrict__ part_w, acc_t<T>* __restrict__ part_b) {
  using A = acc_t<T>;
  using Vec = dv::AlignedVector<T, W>;
  constexpr int K = dv::kFusedPiecesPerLane<A, W>;
  __shared__ dv::Pair<A> scratch[kMaxRowsPerBlock][dv::kWarp];
  __shared__ dv::Pair<A> total[kMaxRowsPerBlock];
  const int lane = threadIdx.x, group = threadIdx.y, lanes = blockDim.x;
  const int64_t chunk = blockIdx.x, pieces = D / W;
  A sw[K][W], sb[K][W];  // this lane's columns: sums of grad * xhat and of grad
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int l = 0; l < W; ++l) sw[k][l] = sb[k][l] = A(0);
  }
  auto weight_at = [&](int64_t j) {
    if constexpr (W > 1) {
      if (weight) return dv::load_vector<T, W>(weight, j);
    } else {
      if (weight) return Vec{{weight[j]}};
    }
    Vec one;
#pragma unroll
    for (int l = 0; l < W; ++l) one.v[l] = dv::from_acc<T>(A(1));
    return one;
  };
  // The groups walk the chunk's rows in step (for_each_group_row's rows): every thread reaches
  // the row reduction's barriers; a group past the chunk's end adds nothing.
  const dv::RowRange rows = dv::fused_chunk_rows(plan, R, chunk);
  for (int64_t first = rows.begin; first < rows.end; first += plan.rows_per_block) {
    const int64_t r = first + group;
    const bool active = r < rows.end;
    const int64_t base = (active ? r : 0) * D;
    const A mu = active ? mean[r] : A(0), rs = active ? rstd[r] : A(0);
    dv::Pair<A> p = dv::PairSumOp<A>::identity();
    if (active) {
      dv::for_each_lane_piece<K>(pieces, lane, lanes, [&](int k, int64_t j) {
        const Vec ga = dv::load_vector<T, W>(grad + base, j), xa = dv::load_vector<T, W>(x + base, j);
        const Vec wa = weight_at(j);
#pragma unroll
        for (int l = 0; l < W; ++l) {
          const A g = dv::to_acc(ga.v[l]), xh = (dv::to_acc(xa.v[l]) - mu) * rs, gh = g * dv::to_acc(wa.v[l]);
          p.a += gh;
          p.b += gh * xh;
          sw[k][l] += g * xh;
          sb[k][l] += g;
        }
      });
    }
    p = row_pair_sum(p, scratch[group], &total[group]);
    if (active) {
      const A s1 = p.a / static_cast<A>(D), s2 = p.b / static_cast<A>(D);
      dv::for_each_lane_piece<K>(pieces, lane, lanes, [&](int, int64_t j) {
        // grad and x again, from the L1 cache: this lane read them a moment ago.
        const Vec ga = dv::load_vector<T, W>(grad + base, j), xa = dv::load_vector<T, W>(x + base, j);
        const Vec wa = weight_at(j);
        Vec o;
#pragma unroll
        for (int l = 0; l < W; ++l) {
          const A xh = (dv::to_acc(xa.v[l]) - mu) * rs, gh = dv::to_acc(ga.v[l]) * dv::to_acc(wa.v[l]);
          o.v[l] = dv::from_acc<T>(rs * (gh - s1 - xh * s2));
        }
        if constexpr (AddH) {
          const Vec ha = dv::load_vector<T, W>(grad_h + base, j);
#pragma unroll
          for (int l = 0; l < W; ++l) o.v[l] = dv::from_acc<T>(add_rn(dv::to_acc(o.v[l]), dv::to_acc(ha.v[l])));
        }
        dv::store_vector<T, W>(dx + base, j, o);
      });
    }
  }
  A* out_w = part_w + chunk * D;
  A* out_b = part_b + chunk * D;
  if (plan.rows_per_block == 1) {
    dv::for_each_lane_piece<K>(pieces, lane, lanes, [&](int k, int64_t j) {
#pragma unroll
      for (int l = 0; l < W; ++l) {
        out_w[j * W + l] = sw[k][l];
        out_b[j * W + l] = sb[k][l];
      }
    });
    return;
  }
  // The groups' sums in group order: the first group's, plus the second's, ...
  A* cw = reinterpret_cast<A*>(row_cache::dynamic_smem());
  A* cb = cw + D;
  for (int g = 0; g < plan.rows_per_block; ++g) {
    if (group == g) {
      dv::for_each_lane_piece<K>(pieces, lane, lanes, [&](int k, int64_t j) {
#pragma unroll
        for (int l = 0; l < W; ++l) {
          const int64_t c = j * W + l;
          cw[c] = g == 0 ? sw[k][l] : cw[c] + sw[k][l];
          cb[c] = g == 0 ? sb[k][l] : cb[c] + sb[k][l];
        }
      });
    }
    __syncthreads();
  }
  const int threads = lanes * plan.rows_per_block;
  for (int64_t c = group * lanes + lane; c < D; c += threads) {
    out_w[c] = cw[c];
    out_b[c] = cb[c];
  }
}

// dweight, dbias: (D) or null, `=`: each column's chunk partials (part_w, part_b: (chunks, D))
// added as for_each_finish_chunk says. Block (kColumnTile, kFinishLanes), one per column tile.
template <class T>
__global__ void __launch_bounds__(dv::kColumnTile* dv::kFinishLanes)
    layer_norm_sums_finish_kernel(int64_t D, int64_t chunks, const acc_t<T>* __restrict__ part_w,
                                  const acc_t<T>* __restrict__ part_b, T* __restrict__ dweight, T* __restrict__ dbias) {
  using A = acc_t<T>;
  __shared__ A lw[dv::kFinishLanes][dv::kColumnTile], lb[dv::kFinishLanes][dv::kColumnTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * dv::kColumnTile + tx;
  A tw = 0, tb = 0;
  if (col < D) {
    dv::for_each_finish_chunk(chunks, ty, [&](int64_t k) {
      tw += part_w[k * D + col];
      tb += part_b[k * D + col];
    });
  }
  lw[ty][tx] = tw;
  lb[ty][tx] = tb;
  __syncthreads();
  if (ty != 0 || col >= D) return;
  tw = 0;
  tb = 0;
  for (int y = 0; y < dv::kFinishLanes; ++y) {
    tw += lw[y][tx];
    tb += lb[y][tx];
  }
  if (dweight) dweight[col] = dv::from_acc<T>(tw);
  if (dbias) dbias[col] = dv::from_acc<T>(tb);
}

// True unless BRISK_CUDA_FUSED_LN_BACKWARD is 0, false, off or no (read at each call, so one
// process can time both paths).
bool fused_backward_enabled() {
  return brisk::envvar::get_bool("BRISK_CUDA_FUSED_LN_BACKWARD", true);
}

// The one-pass kernel and its finish, when dx and a weight sum are both wanted and the rows fit
// the registers' sums (D up to 16,384 read as vectors, 8,192 for f64; 4,096 otherwise). Returns
// false when it did not run.
template <class T, bool AddH>
bool launch_fused_backward(const Tensor& grad, const Tensor& grad_h, const Tensor& x, const Tensor& mean,
                           const Tensor& rstd, const Tensor& weight, const Tensor& dx, const Tensor& dweight,
                           const Tensor& dbias, int64_t R, int64_t D, int device, cudaStream_t stream) {
  using A = acc_t<T>;
  const bool add_h = AddH && grad_h.defined();
  const auto l = nn_common::row_launch(R, D, sizeof(T),
                                       {grad.data_ptr(), add_h ? grad_h.data_ptr() : nullptr, x.data_ptr(),
                                        dx.data_ptr(), weight.defined() ? weight.data_ptr() : nullptr},
                                       device);
  constexpr int VW = dv::vec_width<T>;
  const dv::FusedNormPlan plan = l.vectorized ? dv::fused_norm_plan(R, D / VW, dv::kFusedPiecesPerLane<A, VW>)
                                              : dv::fused_norm_plan(R, D, dv::kFusedPiecesPerLane<A, 1>);
  if (!plan.fits) return false;
  Tensor part = empty({2, plan.chunks.chunks, D}, dtype_of_v<A>, x.device());
  A* pw = mptr<A>(part);
  A* pb = pw + plan.chunks.chunks * D;
  const size_t smem = plan.rows_per_block > 1 ? 2 * static_cast<size_t>(D) * sizeof(A) : 0;
  auto go = [&](auto kernel) {
    rt::launch(add_h ? "add_layer_norm_dx_sums" : "layer_norm_dx_sums", kernel,
               dim3(static_cast<unsigned>(plan.chunks.chunks)),
               dim3(static_cast<unsigned>(plan.lanes), static_cast<unsigned>(plan.rows_per_block)), smem, stream, R, D,
               plan, cptr<T>(grad), cptr<T>(grad_h), cptr<T>(x), cptr<T>(weight), cptr<A>(mean), cptr<A>(rstd),
               mptr<T>(dx), pw, pb);
  };
  if (l.vectorized)
    add_h ? go(layer_norm_backward_fused_kernel<VW, T, true>) : go(layer_norm_backward_fused_kernel<VW, T, false>);
  else
    add_h ? go(layer_norm_backward_fused_kernel<1, T, true>) : go(layer_norm_backward_fused_kernel<1, T, false>);
  rt::launch("layer_norm_sums_finish", layer_norm_sums_finish_kernel<T>,
             dim3(static_cast<unsigned>((D + dv::kColumnTile - 1) / dv::kColumnTile)),
             dim3(dv::kColumnTile, dv::kFinishLanes), 0, stream, D, plan.chunks.chunks, static_cast<const A*>(pw),
             static_cast<const A*>(pb), mptr<T>(dweight), mptr<T>(dbias));
  return true;
}

// layer_norm_backward (grad_h undefined) and add_layer_norm_backward (x is h): the one-pass
// kernel when it applies; else the input gradient in one row kernel (grad_h added there), and
// the weight and bias gradients as column sums (chunks of rows, then the chunks in order).
template <bool AddH>
void launch_layer_norm_backward(const char* name, const Tensor& grad, const Tensor& grad_h, const Tensor& x,
                                const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& dx,
                                const Tensor& dweight, const Tensor& dbias) {
  OpScope scope(name, &grad, &x, &weight);
  const int64_t R = mean.numel(), D = R ? x.numel() / R : 0;
  if (R == 0 || D == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const bool try_fused = dx.defined() && (dweight.defined() || dbias.defined()) && fused_backward_enabled();
  visit_float(x.dtype(), x.device(), name, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    if (try_fused &&
        launch_fused_backward<T, AddH>(grad, grad_h, x, mean, rstd, weight, dx, dweight, dbias, R, D, device, stream))
      return;
    if (dx.defined()) {
      const auto l = nn_common::row_launch(
          R, D, sizeof(T),
          {grad.data_ptr(), grad_h.defined() ? grad_h.data_ptr() : nullptr, x.data_ptr(), dx.data_ptr()}, device);
      // add_layer_norm_backward without h's own gradient (grad_h undefined) is layer norm's.
      const bool add_h = AddH && grad_h.defined();
      const char* dx_name = add_h ? "add_layer_norm_dx" : "layer_norm_dx";
      auto go = [&](auto kernel) {
        rt::launch(dx_name, kernel, l.grid, l.block, 0, stream, R, D, cptr<T>(grad), cptr<T>(grad_h), cptr<T>(x),
                   cptr<T>(weight), cptr<A>(mean), cptr<A>(rstd), mptr<T>(dx));
      };
      constexpr int W = dv::vec_width<T>;
      if (l.vectorized)
        add_h ? go(layer_norm_dx_kernel<W, T, true>) : go(layer_norm_dx_kernel<W, T, false>);
      else
        add_h ? go(layer_norm_dx_kernel<1, T, true>) : go(layer_norm_dx_kernel<1, T, false>);
    }
    if (!dweight.defined() && !dbias.defined()) return;
    const dv::ColumnChunks cc = dv::column_chunks(R);
    Tensor part = empty({2, cc.chunks, D}, dtype_of_v<A>, x.device());
    A* pw = mptr<A>(part);
    A* pb = pw + cc.chunks * D;
    const dim3 grid(static_cast<unsigned>((D + dv::kColumnTile - 1) / dv::kColumnTile),
                    static_cast<unsigned>(cc.chunks));
    rt::launch("layer_norm_columns", layer_norm_columns_kernel<T>, grid, dim3(dv::kColumnTile, dv::kColumnLanes), 0,
               stream, R, D, cc, cptr<T>(grad), cptr<T>(x), cptr<A>(mean), cptr<A>(rstd), pw, pb);
    rt::launch("layer_norm_columns_finish", layer_norm_columns_finish_kernel<T>, dim3(rt::blocks_for(D, 256)),
               dim3(256), 0, stream, D, cc.chunks, static_cast<const A*>(pw), static_cast<const A*>(pb),
               mptr<T>(dweight), mptr<T>(dbias));
  });
}

}  // namespace

void layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  launch_layer_norm_backward<false>("layer_norm backward", grad, Tensor(), x, mean, rstd, weight, dx, dweight, dbias);
}

void add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h, const Tensor& mean,
                             const Tensor& rstd, const Tensor& weight, const Tensor& dinput, const Tensor& dweight,
                             const Tensor& dbias) {
  launch_layer_norm_backward<true>("add_layer_norm backward", grad_y, grad_h, h, mean, rstd, weight, dinput, dweight,
                                   dbias);
}

}  // namespace brisk::kernels::cuda
