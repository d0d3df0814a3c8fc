// Fused scaled dot-product attention on the GPU, flash-attention-2 style, for f16 and bf16 with
// tensor-core mma.sync (m16n8k16, f32 accumulation), and f32 with plain FMAs; head dims 32, 64,
// 80, 96 and 128.
//
// Forward: a CTA of 4 warps per (64-query tile, batch * head); each warp owns 16 query rows,
// keeps their Q fragments in registers and walks the key tiles (64 keys; only those at or
// before the query tile when causal), staging K (row-major) and V (transposed) in shared memory.
// Scores stay in registers: scaled to log2 units, masked, an online softmax in f32 (running
// row max and sum, the output accumulator rescaled when the max grows), then P (rounded to the
// input dtype) times V accumulates the output. It writes O and the row logsumexp L (f32).
//
// Backward, three kernels: delta = rowsum(dO * O) per query row (f32); dK, dV with a CTA per
// (64-key tile, batch * head), each warp owning 16 keys over every query tile that sees them
// (P^T recomputed from L, dV += P^T dO, dP^T = V dO^T, dS^T = P^T * (dP^T - delta),
// dK += dS^T Q); dQ with a CTA per query tile walking the key tiles like the forward (dQ += dS K).
// The separate dQ pass recomputes S and dP instead of adding into dQ with atomics, so results
// are bitwise reproducible (the library's deterministic default).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .row.col, lane = 4 * g + t): A (16 x 16) a0 =
// (g, 2t..2t+1), a1 = (g + 8, 2t..), a2 = (g, 2t + 8..), a3 = (g + 8, 2t + 8..); B (16 x 8, k x n)
// b0 = (k 2t..2t+1, n g), b1 = (k 2t + 8.., n g); C (16 x 8) c0, c1 = (g, 2t..2t+1), c2, c3 =
// (g + 8, 2t..). So a C tile pair (columns 16j..16j+15) is an A fragment as it stands, and a B
// fragment reads 2 consecutive elements from a shared-memory matrix that holds B^T row-major.
// Every operand a kernel multiplies is staged so that the k dimension is contiguous.
//
// f32 takes the same tiles, grids and passes without tensor cores (two threads per row, plain
// fmaf; see the f32 section below), so f32 results are as accurate as the unfused ops'.
#include <cstdint>
#include <type_traits>

#include "brisk/kernels/dispatch.h"
#include "cuda/attention.h"
#include "cuda/attention_kernels.cuh"
#include "cuda/launch.cuh"

namespace brisk::kernels::cuda {

namespace {

using brisk::cuda::detail::launch;
using namespace attention_detail;

View view_of(const Tensor& t) {
  return View{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

OutView out_view_of(const Tensor& t) {
  BRISK_CHECK(t.dim() == 4 && t.stride(3) == 1, "attention (CUDA): outputs need a contiguous last dim, got strides ",
              t.strides());
  return OutView{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

Args make_args(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  Args a{};
  a.q = view_of(q);
  a.k = view_of(k);
  a.v = view_of(v);
  a.batch_heads = q.size(0) * q.size(1);
  a.heads = q.size(1);
  a.tq = q.size(2);
  a.tk = k.size(2);
  a.scale = static_cast<float>(scale);
  a.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  return a;
}

// Calls f(std::integral_constant<int, D>{}) for the supported head dims.
template <class F>
void visit_head_dim(int64_t d, F&& f) {
  switch (d) {
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 80:
      return f(std::integral_constant<int, 80>{});
    case 96:
      return f(std::integral_constant<int, 96>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    default:
      BRISK_THROW("attention (CUDA): head dim ", d, " is not supported by the fused kernels (32, 64, 80, 96, 128)");
  }
}

// Calls f(T{}) for f32, f16 and bf16.
template <class F>
void visit_attention_dtype(const Tensor& t, const char* op, F&& f) {
  switch (t.dtype()) {
    case DType::F32:
      return f(float{});
    case DType::F16:
      return f(Half{});
    case DType::BF16:
      return f(BFloat16{});
    default:
      throw_not_implemented(op, t.dtype(), t.device());
  }
}

unsigned tiles_of(int64_t n) {
  return static_cast<unsigned>((n + kTile - 1) / kTile);
}

template <class T, int D, bool Causal>
void launch_forward(dim3 grid, cudaStream_t stream, const Args& a) {
  if constexpr (std::is_same_v<T, float>)
    launch("attention_forward", attention_forward_f32_kernel<D, Causal>, grid, dim3(kThreads),
           forward_f32_smem_bytes<D>(), stream, a);
  else
    launch("attention_forward", attention_forward_kernel<T, D, Causal>, grid, dim3(kThreads), forward_smem_bytes<D>(),
           stream, a);
}

template <class T, int D, bool Causal>
void launch_backward(dim3 kv_grid, dim3 q_grid, cudaStream_t stream, const Args& kv, const Args& qa) {
  if constexpr (std::is_same_v<T, float>) {
    launch("attention_backward_kv", attention_backward_kv_f32_kernel<D, Causal>, kv_grid, dim3(kThreads),
           backward_kv_f32_smem_bytes<D>(), stream, kv);
    launch("attention_backward_q", attention_backward_q_f32_kernel<D, Causal>, q_grid, dim3(kThreads),
           forward_f32_smem_bytes<D>(), stream, qa);
  } else {
    launch("attention_backward_kv", attention_backward_kv_kernel<T, D, Causal>, kv_grid, dim3(kThreads),
           backward_kv_smem_bytes<D>(), stream, kv);
    launch("attention_backward_q", attention_backward_q_kernel<T, D, Causal>, q_grid, dim3(kThreads),
           backward_q_smem_bytes<D>(), stream, qa);
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, const Tensor& out,
                       const Tensor& lse) {
  OpScope scope("attention_forward", &q, &k, &v);
  if (q.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(q.device().index);
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(q.device().index);
  Args a = make_args(q, k, v, scale);
  a.out = out_view_of(out);
  a.lse = static_cast<float*>(lse.data_ptr());
  const dim3 grid(static_cast<unsigned>(q.size(0) * q.size(1)), tiles_of(a.tq));
  visit_attention_dtype(q, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    visit_head_dim(q.size(3), [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      if (causal)
        launch_forward<T, D, true>(grid, stream, a);
      else
        launch_forward<T, D, false>(grid, stream, a);
    });
  });
}

void attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, bool causal, double scale, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, const Tensor& delta) {
  OpScope scope("attention_backward", &grad, &q, &k);
  if (q.numel() == 0 || k.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(q.device().index);
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(q.device().index);
  Args a = make_args(q, k, v, scale);
  a.o = view_of(out);
  a.g = view_of(grad);
  a.lse = static_cast<float*>(lse.data_ptr());
  a.delta = static_cast<float*>(delta.data_ptr());
  const int64_t bh = q.size(0) * q.size(1);
  Args kv = a;
  kv.out = out_view_of(dk);
  kv.out2 = out_view_of(dv);
  Args qa = a;
  qa.out = out_view_of(dq);
  const dim3 kv_grid(static_cast<unsigned>(bh), tiles_of(a.tk)), q_grid(static_cast<unsigned>(bh), tiles_of(a.tq));
  constexpr int kRowsPerBlock = 8;  // warps of the delta kernel: one per query row
  const dim3 delta_grid(brisk::cuda::detail::blocks_for(bh * a.tq, kRowsPerBlock));
  visit_attention_dtype(q, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    visit_head_dim(q.size(3), [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      launch("attention_backward_delta", attention_delta_kernel<T, D>, delta_grid, dim3(kRowsPerBlock * 32), 0, stream,
             a);
      if (causal)
        launch_backward<T, D, true>(kv_grid, q_grid, stream, kv, qa);
      else
        launch_backward<T, D, false>(kv_grid, q_grid, stream, kv, qa);
    });
  });
}

}  // namespace brisk::kernels::cuda
