// How the GPU reductions split their work, written once for host and device: which thread of
// which block reads which input elements, in which order, and how the partial results are
// combined. The CUDA kernels (kernels/cuda/reduce_kernel.cuh, softmax.cu) run these functions,
// and emulate_reduce() / emulate_softmax() run the same plan on the host, with the device's
// combine trees (device/reduce.h), so the host tests can check that every element is read once
// and that the result equals the CPU kernels'.
//
// A reduction sees its input as kept dims (one output each) and reduced dims, both coalesced
// (size-1 dims dropped, mergeable neighbours merged; C order is kept, so the reduced index r of
// an element is its C-order position among the reduced dims, which argmax returns). Two layouts:
//  - Row: `lanes` threads along x share one output (32: one warp per output, 8 outputs a block;
//    64..512: one block per output) and read the reduced range with stride `lanes`: coalesced
//    when the reduced dims are the innermost, with 128-bit loads when every row is contiguous
//    and 16-byte aligned. The lanes are combined by warp_reduce or block_reduce.
//  - Column: 32 outputs along x, `lanes` (1..16) threads along y per output reading rows r, r +
//    lanes, ...: coalesced when the kept dims are the innermost (sum over dim 0 of (N, C)). The
//    y lanes are combined by a shared-memory tree (y += y + s for s = lanes/2, ..., 1).
// When there are too few outputs to fill the GPU, `splits` blocks (grid y) share each output:
// split s reads reduced indices [s * chunk, (s + 1) * chunk), writes a partial to a workspace,
// and a second kernel combines the splits in order 0, 1, ..., so the result never depends on
// timing (no atomics).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "brisk/core/dtype.h"
#include "brisk/core/macros.h"
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/indexing.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/device/vec.h"

namespace brisk::kernels::device {

// Sums accumulate as the CPU kernels do: f64 for f32 and f64 (free on a memory-bound GPU
// reduction, and it keeps f32 sums of millions of elements as accurate as the CPU's), f32 for
// f16/bf16, i64 for integers and bool.
template <class T>
using sum_acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_floating_point_v<T>, double, float>>;

inline constexpr int kReduceMaxThreads = 512;  // threads of a reduction block
inline constexpr int kReduceMaxSplits = 1024;  // blocks sharing one output

enum class ReduceLayout : int32_t { Row, Column };

// Passed by value to every reduction kernel.
struct ReducePlan {
  ReduceLayout layout = ReduceLayout::Row;
  int64_t n_out = 0, n_red = 0;
  int lanes = kWarp;   // threads per output in a block (Row: along x; Column: along y)
  int vec = 1;         // Row: elements per load (> 1: 128-bit loads of contiguous rows)
  int64_t splits = 1;  // blocks per output (grid y)
  int64_t chunk = 0;   // reduced indices per split (a multiple of lanes * vec)
  uint32_t block_x = kWarp, block_y = 1, grid_x = 1, grid_y = 1;
  StridedIndexer<1> kept;  // output index (C order over the kept dims) -> offset of its first element
  StridedIndexer<1> red;   // reduced index -> offset from there (when red_dims > 1)
  int red_dims = 0;        // reduced dims after coalescing
  int64_t red_stride = 0;  // their stride when red_dims <= 1
};

// The output, split and lane of one thread.
struct ReduceRole {
  int64_t out;
  int64_t split;
  int lane;
};

BRISK_HOST_DEVICE inline ReduceRole reduce_role(const ReducePlan& p, uint32_t bx, uint32_t by, uint32_t tx,
                                                uint32_t ty) {
  if (p.layout == ReduceLayout::Row) return {static_cast<int64_t>(bx) * p.block_y + ty, by, static_cast<int>(tx)};
  return {static_cast<int64_t>(bx) * p.block_x + tx, by, static_cast<int>(ty)};
}

// The thread that holds its group's combined value after the tree.
BRISK_HOST_DEVICE inline bool reduce_leader(const ReducePlan& p, uint32_t tx, uint32_t ty) {
  return p.layout == ReduceLayout::Row ? tx == 0 : ty == 0;
}

BRISK_HOST_DEVICE inline int64_t reduced_offset(const ReducePlan& p, int64_t r) {
  if (p.red_dims <= 1) return r * p.red_stride;
  int64_t off[1];
  p.red.offsets(r, off);
  return off[0];
}

// Calls visit(offset, r) for every piece the thread `role` reads, in order: with W > 1 (only when
// p.vec == W) a piece is the W contiguous elements offset .. offset + W - 1 with reduced indices
// r .. r + W - 1; with W == 1 it is the single element at `offset`.
template <int W, class Visit>
BRISK_HOST_DEVICE inline void for_each_piece(const ReducePlan& p, const ReduceRole& role, Visit&& visit) {
  if (role.out >= p.n_out) return;
  int64_t base[1];
  p.kept.offsets(role.out, base);
  const int64_t begin = role.split * p.chunk;
  const int64_t end = p.n_red < begin + p.chunk ? p.n_red : begin + p.chunk;
  if constexpr (W > 1) {
    for (int64_t r = begin + static_cast<int64_t>(role.lane) * W; r < end; r += static_cast<int64_t>(p.lanes) * W)
      visit(base[0] + r, r);
  } else {
    for (int64_t r = begin + role.lane; r < end; r += p.lanes) visit(base[0] + reduced_offset(p, r), r);
  }
}

// Split partials of output o, combined in split order (what the second kernel does).
template <class Op, class Acc>
BRISK_HOST_DEVICE inline Acc combine_splits(const Acc* partials, int64_t n_out, int64_t splits, int64_t o) {
  Acc a = partials[o];
  for (int64_t s = 1; s < splits; ++s) a = Op::combine(a, partials[s * n_out + o]);
  return a;
}

// --- reduction ops: identity, combine (static, for the trees) and push (one element) ------------

template <class S>
struct SumReduce {
  using Acc = S;
  BRISK_HOST_DEVICE static S identity() { return S(0); }
  BRISK_HOST_DEVICE static S combine(S a, S b) { return a + b; }
  template <class V>
  BRISK_HOST_DEVICE S push(S a, V v, int64_t, int64_t) const {
    return a + static_cast<S>(v);
  }
};

template <class S>
struct ProdReduce {
  using Acc = S;
  BRISK_HOST_DEVICE static S identity() { return S(1); }
  BRISK_HOST_DEVICE static S combine(S a, S b) { return a * b; }
  template <class V>
  BRISK_HOST_DEVICE S push(S a, V v, int64_t, int64_t) const {
    return a * static_cast<S>(v);
  }
};

// amax / amin (Cmp = MaxOp<A> / MinOp<A>): NaN wins.
template <class Cmp, class A>
struct ExtremeReduce {
  using Acc = A;
  BRISK_HOST_DEVICE static A identity() { return Cmp::identity(); }
  BRISK_HOST_DEVICE static A combine(A a, A b) { return Cmp::combine(a, b); }
  BRISK_HOST_DEVICE A push(A a, A v, int64_t, int64_t) const { return Cmp::combine(a, v); }
};

// max/min along dims with the first index (Cmp = ArgMaxOp<A> / ArgMinOp<A>).
template <class Cmp, class A>
struct ArgReduce {
  using Acc = ValueIndex<A>;
  BRISK_HOST_DEVICE static Acc identity() { return Cmp::identity(); }
  BRISK_HOST_DEVICE static Acc combine(Acc a, Acc b) { return Cmp::combine(a, b); }
  BRISK_HOST_DEVICE Acc push(Acc a, A v, int64_t, int64_t r) const { return Cmp::combine(a, Acc{v, r}); }
};

// The second pass of var/std: squared deviations from each output's mean (means[o], in S).
template <class S>
struct SquaredDevReduce {
  using Acc = S;
  const S* means;
  BRISK_HOST_DEVICE static S identity() { return S(0); }
  BRISK_HOST_DEVICE static S combine(S a, S b) { return a + b; }
  template <class V>
  BRISK_HOST_DEVICE S push(S a, V v, int64_t o, int64_t) const {
    const S d = static_cast<S>(v) - means[o];
    return a + d * d;
  }
};

// logsumexp: the online softmax state (running max, sum of exp(x - max)).
template <class A>
struct LogSumExpReduce {
  using Acc = SoftmaxState<A>;
  BRISK_HOST_DEVICE static Acc identity() { return OnlineSoftmaxOp<A>::identity(); }
  BRISK_HOST_DEVICE static Acc combine(Acc a, Acc b) { return OnlineSoftmaxOp<A>::combine(a, b); }
  BRISK_HOST_DEVICE Acc push(Acc a, A v, int64_t, int64_t) const { return OnlineSoftmaxOp<A>::push(a, v); }
};

// log(sum(exp(x))) from the online state, with the CPU's special cases: NaN anywhere gives NaN,
// +inf anywhere gives +inf, all -inf (or nothing) gives -inf.
template <class A>
BRISK_HOST_DEVICE inline A logsumexp_result(SoftmaxState<A> s) {
  using std::log;
  if (is_nan_value(s.max)) return s.max;
  if (s.max == std::numeric_limits<A>::infinity()) return s.max;
  return s.max + log(s.sum);
}

// var/std from the sum of squared deviations: ss / denom (f64), square-rooted for std.
template <class S>
BRISK_HOST_DEVICE inline double variance_result(S ss, double denom, bool take_sqrt) {
  using std::sqrt;
  const double v = static_cast<double>(ss) / denom;
  return take_sqrt ? sqrt(v) : v;
}

// --- the plan -----------------------------------------------------------------------------------

BRISK_HOST_DEVICE constexpr int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}
BRISK_HOST_DEVICE constexpr int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
BRISK_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

namespace detail {

// Size-1 dims dropped, neighbours merged when the outer stride is the inner one times its size.
inline void coalesce_in_order(Shape& sz, Strides& st) {
  Shape s;
  Strides t;
  for (size_t i = 0; i < sz.size(); ++i) {
    if (sz[i] == 1) continue;
    if (!s.empty() && t.back() == st[i] * sz[i]) {
      s.back() *= sz[i];
      t.back() = st[i];
    } else {
      s.push_back(sz[i]);
      t.push_back(st[i]);
    }
  }
  sz = std::move(s);
  st = std::move(t);
}

inline int64_t abs64(int64_t v) {
  return v < 0 ? -v : v;
}

// Splits (and the chunk each reads) that bring `blocks` blocks of `threads` threads up to about
// one full GPU (2048 resident threads per SM), keeping at least 16 pieces per lane and split.
inline void choose_splits(ReducePlan& p, int64_t blocks, int64_t threads, int64_t pieces, int sm_count) {
  p.splits = 1;
  p.chunk = p.n_red;
  const int64_t wanted = ceil_div(int64_t{sm_count} * 2048, threads);
  if (blocks * 2 > wanted) return;
  int64_t s = ceil_div(wanted, blocks);
  s = std::min<int64_t>(s, pieces / (int64_t{p.lanes} * 16));
  s = std::min<int64_t>(s, kReduceMaxSplits);
  if (s < 2) return;
  const int64_t step = int64_t{p.lanes} * p.vec;
  p.chunk = ceil_div(ceil_div(p.n_red, s), step) * step;
  p.splits = ceil_div(p.n_red, p.chunk);
  if (p.splits < 2) {
    p.splits = 1;
    p.chunk = p.n_red;
  }
}

}  // namespace detail

// The plan for reducing a tensor of `sizes` / `strides` (elements) over the dims flagged in
// `reduced`, with elements of `elem_bytes` bytes starting at address `data` (for the alignment of
// 128-bit loads), on a GPU with `sm_count` multiprocessors. Host only.
inline ReducePlan make_reduce_plan(const Shape& sizes, const Strides& strides, const std::vector<bool>& reduced,
                                   int elem_bytes, uintptr_t data, int sm_count) {
  ReducePlan p;
  Shape ksz, rsz;
  Strides kst, rst;
  p.n_out = 1;
  p.n_red = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (reduced[d]) {
      rsz.push_back(sizes[d]);
      rst.push_back(strides[d]);
      p.n_red *= sizes[d];
    } else {
      ksz.push_back(sizes[d]);
      kst.push_back(strides[d]);
      p.n_out *= sizes[d];
    }
  }
  detail::coalesce_in_order(ksz, kst);
  detail::coalesce_in_order(rsz, rst);
  if (p.n_out == 0) return p;  // nothing to launch
  sm_count = sm_count < 1 ? 1 : sm_count;
  p.kept = make_indexer<1>(ksz, {kst});
  p.red_dims = static_cast<int>(rsz.size());
  p.red_stride = rsz.size() == 1 ? rst[0] : 0;
  if (rsz.size() > 1 && p.n_red > 0) p.red = make_indexer<1>(rsz, {rst});

  // Column when the kept dims are the inner ones (and wide enough to fill a warp's 32 outputs),
  // or when nothing is reduced (one thread per output).
  const bool column =
      !ksz.empty() && (rsz.empty() || (detail::abs64(kst.back()) < detail::abs64(rst.back()) && ksz.back() >= 16));
  if (column) {
    p.layout = ReduceLayout::Column;
    p.block_x = kWarp;
    const int64_t blocks = ceil_div(p.n_out, kWarp);
    int64_t lanes = int64_t{sm_count} * 2048 / (blocks * kWarp);
    lanes = std::min<int64_t>(std::max<int64_t>(lanes, 1), kReduceMaxThreads / kWarp);
    lanes = std::min<int64_t>(lanes, std::max<int64_t>(1, p.n_red / 4));
    p.lanes = static_cast<int>(pow2_floor(lanes));
    p.block_y = static_cast<uint32_t>(p.lanes);
    p.vec = 1;
    detail::choose_splits(p, blocks, int64_t{kWarp} * p.lanes, p.n_red, sm_count);
    p.grid_x = static_cast<uint32_t>(blocks);
  } else {
    p.layout = ReduceLayout::Row;
    const int w = elem_bytes > 0 && elem_bytes < kVecBytes ? kVecBytes / elem_bytes : 1;
    bool vec = w > 1 && rsz.size() == 1 && rst[0] == 1 && p.n_red % w == 0 && data % kVecBytes == 0;
    for (int64_t s : kst) vec = vec && s % w == 0;
    p.vec = vec ? w : 1;
    const int64_t pieces = p.n_red / p.vec;
    p.lanes = pieces <= int64_t{8} * kWarp
                  ? kWarp
                  : static_cast<int>(
                        std::min<int64_t>(kReduceMaxThreads, std::max<int64_t>(64, pow2_ceil(ceil_div(pieces, 8)))));
    p.block_x = static_cast<uint32_t>(p.lanes);
    p.block_y = p.lanes == kWarp ? static_cast<uint32_t>(std::min<int64_t>(8, p.n_out)) : 1;
    const int64_t blocks = ceil_div(p.n_out, p.block_y);
    detail::choose_splits(p, blocks, int64_t{p.block_x} * p.block_y, pieces, sm_count);
    p.grid_x = static_cast<uint32_t>(blocks);
  }
  BRISK_CHECK(ceil_div(p.n_out, p.layout == ReduceLayout::Row ? p.block_y : p.block_x) <= 0x7fffffff,
              "cuda reduction: ", p.n_out, " outputs need more blocks than a grid holds");
  p.grid_y = static_cast<uint32_t>(p.splits);
  return p;
}

// --- softmax rows ---------------------------------------------------------------------------------

// Softmax, log_softmax (and their backward) over the last dim of a contiguous (rows, n) tensor:
// `lanes` threads per row (a warp, 8 rows a block, for rows up to 256 pieces; else a block of
// 64..1024), each reading pieces lane * vec, (lane + lanes) * vec, ... (128-bit loads when the
// rows are 16-byte aligned); the lanes' online softmax states (or sums) are combined by
// warp_reduce / block_reduce and broadcast, then each lane writes the same pieces.
struct SoftmaxPlan {
  int64_t rows = 0, n = 0;
  int lanes = kWarp;
  int rows_per_block = 1;
  int vec = 1;
  uint32_t grid_x = 1;
};

inline SoftmaxPlan make_softmax_plan(int64_t rows, int64_t n, int elem_bytes, bool aligned16) {
  SoftmaxPlan p;
  p.rows = rows;
  p.n = n;
  const int w = elem_bytes > 0 && elem_bytes < kVecBytes ? kVecBytes / elem_bytes : 1;
  p.vec = w > 1 && aligned16 && n % w == 0 ? w : 1;
  const int64_t pieces = n / p.vec;
  p.lanes = pieces <= int64_t{8} * kWarp
                ? kWarp
                : static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(64, pow2_ceil(ceil_div(pieces, 8)))));
  p.rows_per_block = p.lanes == kWarp ? static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(rows, 1))) : 1;
  const int64_t blocks = ceil_div(std::max<int64_t>(rows, 1), p.rows_per_block);
  BRISK_CHECK(blocks <= 0x7fffffff, "cuda softmax: ", rows, " rows need more blocks than a grid holds");
  p.grid_x = static_cast<uint32_t>(blocks);
  return p;
}

// Calls visit(i) for the first element i of each piece lane `lane` handles in a row, in order.
template <int W, class Visit>
BRISK_HOST_DEVICE inline void for_each_row_piece(const SoftmaxPlan& p, int lane, Visit&& visit) {
  for (int64_t i = static_cast<int64_t>(lane) * W; i < p.n; i += static_cast<int64_t>(p.lanes) * W) visit(i);
}

// What a row's combined online state turns into: y = exp(x - max) * scale (softmax, scale =
// 1 / sum) or (x - max) - scale (log_softmax, scale = log(sum)). A +inf in the row makes the
// CPU's exp pass NaN (exp(inf - inf)); the state's sum is made NaN to match.
template <class A>
struct SoftmaxNorm {
  A max;
  A scale;
};
template <class A>
BRISK_HOST_DEVICE inline SoftmaxNorm<A> softmax_norm(SoftmaxState<A> s, bool log_softmax) {
  using std::log;
  if (s.max == std::numeric_limits<A>::infinity()) s.sum = std::numeric_limits<A>::quiet_NaN();
  return {s.max, log_softmax ? log(s.sum) : A(1) / s.sum};
}
template <class A>
BRISK_HOST_DEVICE inline A softmax_value(A x, SoftmaxNorm<A> n, bool log_softmax) {
  using std::exp;
  return log_softmax ? (x - n.max) - n.scale : exp(x - n.max) * n.scale;
}

// --- host emulation -------------------------------------------------------------------------------

// What the column tree over `lanes` (a power of two) y-threads leaves in y = 0, in the device's order.
template <class Op, class T>
T emulate_column_tree(std::vector<T> v) {
  for (size_t s = v.size() / 2; s > 0; s /= 2)
    for (size_t y = 0; y < s; ++y) v[y] = Op::combine(v[y], v[y + s]);
  return v[0];
}

// Runs plan p over x (T*, the tensor's first element) on the host exactly as the kernels do:
// each thread's pieces in order, the warp / block / column trees, then the splits in order.
// on_read(offset) is called once per element read. Returns the combined Acc of every output.
template <class Op, class T, class OnRead>
std::vector<typename Op::Acc> emulate_reduce(const ReducePlan& p, const Op& op, const T* x, OnRead&& on_read) {
  using Acc = typename Op::Acc;
  std::vector<Acc> partials(static_cast<size_t>(p.splits * p.n_out), Op::identity());
  if (p.n_out == 0) return {};
  const int64_t threads = int64_t{p.block_x} * p.block_y;
  std::vector<Acc> acc(static_cast<size_t>(threads));
  for (uint32_t by = 0; by < p.grid_y; ++by) {
    for (uint32_t bx = 0; bx < p.grid_x; ++bx) {
      for (uint32_t ty = 0; ty < p.block_y; ++ty) {
        for (uint32_t tx = 0; tx < p.block_x; ++tx) {
          const ReduceRole role = reduce_role(p, bx, by, tx, ty);
          Acc a = Op::identity();
          auto visit = [&](int64_t off, int64_t r, int w) {
            for (int i = 0; i < w; ++i) {
              on_read(off + i);
              a = op.push(a, to_acc(x[off + i]), role.out, r + i);
            }
          };
          if (p.vec > 1) {
            constexpr int W = vec_width<T>;
            for_each_piece<W>(p, role, [&](int64_t off, int64_t r) { visit(off, r, W); });
          } else {
            for_each_piece<1>(p, role, [&](int64_t off, int64_t r) { visit(off, r, 1); });
          }
          acc[ty * p.block_x + tx] = a;
        }
      }
      auto put = [&](int64_t out, const Acc& a) {
        if (out < p.n_out) partials[static_cast<size_t>(int64_t{by} * p.n_out + out)] = a;
      };
      if (p.layout == ReduceLayout::Row && p.lanes == kWarp) {
        for (uint32_t ty = 0; ty < p.block_y; ++ty)
          put(reduce_role(p, bx, by, 0, ty).out, emulate_warp_reduce<Op>(acc.data() + ty * p.block_x));
      } else if (p.layout == ReduceLayout::Row) {
        put(reduce_role(p, bx, by, 0, 0).out, emulate_block_reduce<Op>(acc));
      } else {
        for (uint32_t tx = 0; tx < p.block_x; ++tx) {
          std::vector<Acc> column(p.block_y);
          for (uint32_t ty = 0; ty < p.block_y; ++ty) column[ty] = acc[ty * p.block_x + tx];
          put(reduce_role(p, bx, by, tx, 0).out, emulate_column_tree<Op>(column));
        }
      }
    }
  }
  std::vector<Acc> out(static_cast<size_t>(p.n_out));
  for (int64_t o = 0; o < p.n_out; ++o) out[o] = combine_splits<Op>(partials.data(), p.n_out, p.splits, o);
  return out;
}

// The combined online softmax state of every row of a contiguous (rows, n) x under plan p, in
// the device's order (lanes' pieces, then warp_reduce or block_reduce); on_read(offset) is
// called once per element read.
template <class T, class OnRead>
std::vector<SoftmaxState<acc_t<T>>> emulate_softmax_states(const SoftmaxPlan& p, const T* x, OnRead&& on_read) {
  using A = acc_t<T>;
  using Op = OnlineSoftmaxOp<A>;
  std::vector<SoftmaxState<A>> states(static_cast<size_t>(p.rows));
  std::vector<SoftmaxState<A>> lanes(static_cast<size_t>(p.lanes));
  for (int64_t row = 0; row < p.rows; ++row) {
    const T* xr = x + row * p.n;
    for (int lane = 0; lane < p.lanes; ++lane) {
      SoftmaxState<A> s = Op::identity();
      auto visit = [&](int64_t i, int w) {
        for (int k = 0; k < w; ++k) {
          on_read(row * p.n + i + k);
          s = Op::push(s, to_acc(xr[i + k]));
        }
      };
      if (p.vec > 1) {
        constexpr int W = vec_width<T>;
        for_each_row_piece<W>(p, lane, [&](int64_t i) { visit(i, W); });
      } else {
        for_each_row_piece<1>(p, lane, [&](int64_t i) { visit(i, 1); });
      }
      lanes[lane] = s;
    }
    states[row] = p.lanes == kWarp ? emulate_warp_reduce<Op>(lanes.data()) : emulate_block_reduce<Op>(lanes);
  }
  return states;
}

}  // namespace brisk::kernels::device
