// The fused attention kernels run through the host emulation (attention_emulation.h) for one
// case, checked against the CPU's scaled_dot_product_attention in f32: used by
// tests/cuda/test_attention_emulation.cpp (a few cases, every build) and
// tests/cuda_slow/test_attention_emulation_sweep.cpp (the sweep, label slow). Outputs start as NaN
// and shared memory as 0xff bytes, so anything never written or never staged shows.
#pragma once
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/compare.h"
#include "common/gradcheck.h"
// Last: it defines CUDA's names for the host.
#include "cuda/attention_emulation.h"
#include "cuda/exact_input.h"

namespace brisk::testing::attention_emulation {

namespace ad = brisk::kernels::cuda::attention_detail;
namespace emu = brisk::kernels::cuda::attention_detail::emulation;

using brisk::testing::exact_input;  // i / 32 with |i| <= 32: exact in every dtype

inline ad::View view_of(const Tensor& t) {
  return ad::View{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}
inline ad::OutView out_view_of(const Tensor& t) {
  return ad::OutView{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

// A NaN-filled (B, H, T, D) output in (B, T, H, D) memory, as kernels::attention_forward and
// attention_backward allocate theirs.
inline Tensor nan_output_bthd(const Shape& bhtd, DType dt) {
  return full({bhtd[0], bhtd[2], bhtd[1], bhtd[3]}, NAN, {.dtype = dt}).transpose(1, 2);
}

struct Case {
  DType dt;
  int64_t B, H, Tq, Tk, D;
  bool causal;
  bool strided;  // q, k, v as views of wider buffers (row stride > D)
};

inline std::string describe(const Case& c) {
  return std::string(dtype_name(c.dt)) + (c.causal ? " causal" : " full") + " B=" + std::to_string(c.B) +
         " H=" + std::to_string(c.H) + " Tq=" + std::to_string(c.Tq) + " Tk=" + std::to_string(c.Tk) +
         " D=" + std::to_string(c.D) + (c.strided ? " strided" : "");
}

// (B, H, T, D) in dt; with `strided`, a view of the first D of every 2D + 8 (16-byte aligned rows).
inline Tensor device_layout(const Tensor& x, DType dt, bool strided) {
  if (!strided) return x.to(dt).contiguous();
  Shape wide = x.sizes();
  wide.back() = 2 * x.size(3) + 8;
  Tensor buf = full(wide, NAN, {.dtype = dt});
  buf.narrow(3, 0, x.size(3)).copy_(x.to(dt));
  return buf.narrow(3, 0, x.size(3));
}

template <class T>
inline void run_case(const Case& c) {
  const std::string what = describe(c);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  const Tensor q32 = exact_input({c.B, c.H, c.Tq, c.D}, 1), k32 = exact_input({c.B, c.H, c.Tk, c.D}, 2),
               v32 = exact_input({c.B, c.H, c.Tk, c.D}, 3), g32 = exact_input({c.B, c.H, c.Tq, c.D}, 4);

  // The reference: the CPU op (blocked path) in f32, and the rows' logsumexp.
  Tensor qr = brisk::testing::leaf(q32), kr = brisk::testing::leaf(k32), vr = brisk::testing::leaf(v32);
  Tensor y_ref = scaled_dot_product_attention(qr, kr, vr, {.is_causal = c.causal});
  y_ref.backward(g32);
  Tensor s = matmul(q32 * scale, k32.transpose(-2, -1));
  if (c.causal) s = s + triu(full({c.Tq, c.Tk}, -INFINITY), 1);
  const Tensor lse_ref = logsumexp(s, {-1});

  const Tensor q = device_layout(q32, c.dt, c.strided), k = device_layout(k32, c.dt, c.strided),
               v = device_layout(v32, c.dt, c.strided), go = device_layout(g32, c.dt, c.strided);
  Tensor out = nan_output_bthd({c.B, c.H, c.Tq, c.D}, c.dt);
  Tensor lse = full({c.B, c.H, c.Tq}, NAN, {.dtype = DType::F32});
  Tensor delta = full({c.B, c.H, c.Tq}, NAN, {.dtype = DType::F32});
  Tensor dq = nan_output_bthd(q32.sizes(), c.dt), dk = nan_output_bthd(k32.sizes(), c.dt),
         dv = nan_output_bthd(v32.sizes(), c.dt);

  ad::Args a{};
  a.q = view_of(q);
  a.k = view_of(k);
  a.v = view_of(v);
  a.batch_heads = c.B * c.H;
  a.heads = c.H;
  a.tq = c.Tq;
  a.tk = c.Tk;
  a.scale = static_cast<float>(scale);
  a.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  a.out = out_view_of(out);
  a.lse = static_cast<float*>(lse.data_ptr());
  a.delta = static_cast<float*>(delta.data_ptr());
  const auto tiles = [](int64_t n) { return static_cast<unsigned>((n + ad::kTile - 1) / ad::kTile); };
  const unsigned bh = static_cast<unsigned>(c.B * c.H);
  const dim3 threads{static_cast<unsigned>(ad::kThreads)};
  constexpr bool kF32 = std::is_same_v<T, float>;

  auto with_dim = [&](auto dim) {
    constexpr int kD = decltype(dim)::value;
    auto pick = [&](auto causal_tag) {
      constexpr bool kCausal = decltype(causal_tag)::value;
      if constexpr (kF32) {
        emu::run_grid(ad::attention_forward_f32_kernel<kD, kCausal>, dim3{bh, tiles(c.Tq)}, threads,
                      ad::forward_f32_smem_bytes<kD>(), a);
      } else {
        emu::run_grid(ad::attention_forward_kernel<T, kD, kCausal>, dim3{bh, tiles(c.Tq)}, threads,
                      ad::forward_smem_bytes<kD>(), a);
      }
      ad::Args b = a;
      b.o = view_of(out);
      b.g = view_of(go);
      emu::run_grid(ad::attention_delta_kernel<T, kD>, dim3{static_cast<unsigned>((c.B * c.H * c.Tq + 7) / 8)},
                    dim3{256}, 0, b);
      ad::Args kv = b, qa = b;
      kv.out = out_view_of(dk);
      kv.out2 = out_view_of(dv);
      qa.out = out_view_of(dq);
      if constexpr (kF32) {
        emu::run_grid(ad::attention_backward_kv_f32_kernel<kD, kCausal>, dim3{bh, tiles(c.Tk)}, threads,
                      ad::backward_kv_f32_smem_bytes<kD>(), kv);
        emu::run_grid(ad::attention_backward_q_f32_kernel<kD, kCausal>, dim3{bh, tiles(c.Tq)}, threads,
                      ad::forward_f32_smem_bytes<kD>(), qa);
      } else {
        emu::run_grid(ad::attention_backward_kv_kernel<T, kD, kCausal>, dim3{bh, tiles(c.Tk)}, threads,
                      ad::backward_kv_smem_bytes<kD>(), kv);
        emu::run_grid(ad::attention_backward_q_kernel<T, kD, kCausal>, dim3{bh, tiles(c.Tq)}, threads,
                      ad::backward_q_smem_bytes<kD>(), qa);
      }
    };
    if (c.causal)
      pick(std::true_type{});
    else
      pick(std::false_type{});
  };
  switch (c.D) {
    case 32:
      with_dim(std::integral_constant<int, 32>{});
      break;
    case 64:
      with_dim(std::integral_constant<int, 64>{});
      break;
    case 80:
      with_dim(std::integral_constant<int, 80>{});
      break;
    case 96:
      with_dim(std::integral_constant<int, 96>{});
      break;
    case 128:
      with_dim(std::integral_constant<int, 128>{});
      break;
    default:
      FAIL() << "head dim " << c.D << " not in this test";
  }

  // bf16 and f16 round P and dS before the products (and their outputs); f32 only reorders sums.
  const double bound = c.dt == DType::BF16 ? 2e-2 : c.dt == DType::F16 ? 4e-3 : 1e-5;
  EXPECT_LE(relative_error(out, y_ref.detach()), bound) << what << ": output";
  EXPECT_LE(relative_error(lse, lse_ref), c.dt == DType::F32 ? 1e-6 : 1e-2) << what << ": logsumexp";
  EXPECT_LE(relative_error(dq, qr.grad()), bound) << what << ": dq";
  EXPECT_LE(relative_error(dk, kr.grad()), bound) << what << ": dk";
  EXPECT_LE(relative_error(dv, vr.grad()), bound) << what << ": dv";
}

inline void run_case(const Case& c) {
  switch (c.dt) {
    case DType::BF16:
      return run_case<BFloat16>(c);
    case DType::F16:
      return run_case<Half>(c);
    case DType::F32:
      return run_case<float>(c);
    default:
      FAIL() << "dtype " << dtype_name(c.dt);
  }
}

}  // namespace brisk::testing::attention_emulation
