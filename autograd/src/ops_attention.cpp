// scaled_dot_product_attention: the forward and backward of softmax(q k^T * scale) v over blocks of
// queries, on the kernel layer's products and softmax (so any device the kernels support).
#include "brisk/autograd/ops_attention.h"

#include <cmath>
#include <optional>
#include <vector>

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_index.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/attention.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"
#include "brisk/kernels/linalg.h"
#include "brisk/kernels/reduce.h"

namespace brisk {

namespace {

// Queries per block of the causal form: small enough that skipping the masked blocks saves most
// of the masked half, large enough that each product is an efficient GEMM.
constexpr int64_t kBlock = 64;

struct Block {
  int64_t r0, n, keys;  // queries [r0, r0 + n) against keys [0, keys)
};

std::vector<Block> plan_blocks(int64_t Tq, int64_t Tk, bool causal) {
  if (!causal) return {{0, Tq, Tk}};
  std::vector<Block> blocks;
  for (int64_t r0 = 0; r0 < Tq; r0 += kBlock) {
    const int64_t n = std::min(kBlock, Tq - r0);
    blocks.push_back({r0, n, r0 + n});
  }
  return blocks;
}

// -inf where key c > query r0 + i (the future), 0 elsewhere: (n, n) for the block's last n keys,
// made on the device (no host copy inside a training step).
Tensor future_bias(const Block& b, DType dtype, Device device) {
  return kernels::triu(full({b.n, b.n}, -INFINITY, {.dtype = dtype, .device = device}), 1);
}

// t (..., T, d) as the (B, H, T, d) the fused kernels take: itself when 4-dim, else a view (or
// copy) (1, N, T, d) with N the product of the leading dims.
Tensor as_bhtd(const Tensor& t) {
  if (t.dim() == 4) return t;
  int64_t n = 1;
  for (int64_t i = 0; i < t.dim() - 2; ++i) n *= t.size(i);
  return t.reshape({1, n, t.size(-2), t.size(-1)});
}

// The incoming gradient in the fused kernels' dtype (autocast may hand back another).
Tensor grad_as(const autograd::GradCtx& g, DType dtype) {
  return g.grad().dtype() == dtype ? g.grad() : kernels::cast(g.grad(), dtype);
}

// The fused CUDA kernels (flash-attention style: neither the forward nor the backward keeps the
// probabilities; the backward recomputes them from the output and each row's logsumexp; cuDNN's
// or brisk's, as kernels::attention_backend() says), when they take these inputs and the backend
// is not math. Undefined otherwise.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  if (!q.device().is_cuda() || !kernels::fused_attention_enabled()) return {};
  const Tensor q4 = as_bhtd(q.detach()), k4 = as_bhtd(k.detach()), v4 = as_bhtd(v.detach());
  if (!kernels::fused_attention_supported(q4, k4, v4, causal)) return {};
  kernels::AttentionForwardResult r = kernels::attention_forward(q4, k4, v4, causal, scale);
  Shape out_shape = q.sizes();
  out_shape.back() = v.size(-1);
  Tensor y = r.out.reshape(out_shape);
  if (!autograd::any_requires_grad({&q, &k, &v})) return y;
  const Tensor out4 = r.out.detach(), lse = r.lse;  // detached: y may share out4's handle
  autograd::record("scaled_dot_product_attention", {q, k, v}, y,
                   [q4, k4, v4, out4, lse, causal, scale, qs = q.sizes(), ks = k.sizes(),
                    vs = v.sizes()](const autograd::GradCtx& g) -> std::vector<Tensor> {
                     const Tensor gy = grad_as(g, out4.dtype());
                     kernels::AttentionGrads d =
                         kernels::attention_backward(gy.reshape(out4.sizes()), q4, k4, v4, out4, lse, causal, scale);
                     return {g.needs(0) ? d.dq.reshape(qs) : Tensor(), g.needs(1) ? d.dk.reshape(ks) : Tensor(),
                             g.needs(2) ? d.dv.reshape(vs) : Tensor()};
                   },
                   {q, k, v, y});
  return y;
}

// Head i (0: q, 1: k, 2: v) of a packed (B, T, 3C) tensor as the (B, H, T, hd) view the fused
// kernels take.
Tensor packed_head(const Tensor& t, int64_t i, int64_t n_head) {
  const int64_t C = t.size(2) / 3, hd = C / n_head;
  return t.as_strided({t.size(0), n_head, t.size(1), hd}, {t.stride(0), hd, t.stride(1), 1}, t.offset() + i * C);
}

// scaled_dot_product_attention_packed through the fused CUDA kernels: they read q, k and v where
// they lie in qkv, write the output as (B, T, C) and the gradient as one (B, T, 3C) tensor.
// Undefined where the kernels do not apply.
Tensor fused_attention_packed(const Tensor& qkv, int64_t n_head, bool causal, std::optional<double> scale_opt) {
  if (!qkv.device().is_cuda() || !kernels::fused_attention_enabled() || qkv.stride(2) != 1) return {};
  const Tensor base = qkv.detach();
  const Tensor q4 = packed_head(base, 0, n_head), k4 = packed_head(base, 1, n_head), v4 = packed_head(base, 2, n_head);
  if (!kernels::fused_attention_supported(q4, k4, v4, causal)) return {};
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  const double scale = scale_opt.value_or(1.0 / std::sqrt(static_cast<double>(q4.size(3))));
  kernels::AttentionForwardResult r = kernels::attention_forward(q4, k4, v4, causal, scale);
  const Tensor out4 = r.out, lse = r.lse;  // out4: (B, H, T, hd) in (B, T, H, hd) memory
  Tensor y = out4.as_strided({B, T, C}, {T * C, C, 1}, out4.offset());
  if (!autograd::any_requires_grad({&qkv})) return y;
  autograd::record("scaled_dot_product_attention", {qkv}, y,
                   [q4, k4, v4, out4, lse, causal, scale, n_head](const autograd::GradCtx& g) -> std::vector<Tensor> {
                     Tensor gy = grad_as(g, out4.dtype());
                     if (!gy.is_contiguous()) gy = kernels::contiguous(gy);
                     const int64_t B = gy.size(0), T = gy.size(1), C = gy.size(2), hd = C / n_head;
                     const Tensor gy4 = gy.as_strided({B, n_head, T, hd}, {T * C, hd, C, 1}, gy.offset());
                     Tensor dqkv = empty({B, T, 3 * C}, out4.dtype(), out4.device());
                     const kernels::AttentionGrads into{packed_head(dqkv, 0, n_head), packed_head(dqkv, 1, n_head),
                                                        packed_head(dqkv, 2, n_head)};
                     kernels::attention_backward(gy4, q4, k4, v4, out4, lse, causal, scale, &into);
                     return {dqkv};
                   },
                   {qkv, y});
  return y;
}

}  // namespace

Tensor scaled_dot_product_attention_packed(const Tensor& qkv_in, int64_t n_head, const SdpaOptions& o) {
  profiler::Scope prof_scope("scaled_dot_product_attention");
  BRISK_CHECK(qkv_in.defined() && qkv_in.dim() == 3 && n_head > 0 && qkv_in.size(2) % (3 * n_head) == 0,
              "scaled_dot_product_attention_packed: expected qkv (B, T, 3 * n_head * head dim) and n_head > 0, got "
              "shape ",
              qkv_in.defined() ? qkv_in.sizes() : Shape{}, " and n_head ", n_head);
  const Tensor qkv = autograd::autocast(qkv_in, AutocastCategory::LowerPrecision);
  if (Tensor y = fused_attention_packed(qkv, n_head, o.is_causal, o.scale); y.defined()) return y;
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, hd = C / n_head;
  const std::vector<Tensor> parts = split(qkv, C, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hd}).transpose(1, 2); };
  return scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), o)
      .transpose(1, 2)
      .reshape({B, T, C});
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const SdpaOptions& o) {
  profiler::Scope prof_scope("scaled_dot_product_attention");
  BRISK_CHECK(q_in.defined() && k_in.defined() && v_in.defined(), "scaled_dot_product_attention: undefined input");
  BRISK_CHECK(q_in.dim() >= 2 && k_in.dim() == q_in.dim() && v_in.dim() == q_in.dim(),
              "scaled_dot_product_attention: q, k and v need the same number of dims (>= 2), got shapes ", q_in.sizes(),
              ", ", k_in.sizes(), " and ", v_in.sizes());
  const int64_t nd = q_in.dim();
  for (int64_t d = 0; d < nd - 2; ++d)
    BRISK_CHECK(q_in.size(d) == k_in.size(d) && q_in.size(d) == v_in.size(d),
                "scaled_dot_product_attention: q, k and v must share their leading dims, got shapes ", q_in.sizes(),
                ", ", k_in.sizes(), " and ", v_in.sizes());
  const int64_t Tq = q_in.size(-2), Tk = k_in.size(-2), d = q_in.size(-1);
  BRISK_CHECK(k_in.size(-1) == d && v_in.size(-2) == Tk,
              "scaled_dot_product_attention: expected q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv), got shapes ",
              q_in.sizes(), ", ", k_in.sizes(), " and ", v_in.sizes());
  BRISK_CHECK(!o.is_causal || Tq == Tk, "scaled_dot_product_attention: is_causal needs as many queries as keys, got ",
              Tq, " and ", Tk);
  BRISK_CHECK(q_in.is_floating_point(), "scaled_dot_product_attention: expected floating inputs, got ",
              dtype_name(q_in.dtype()));
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));

  // The products in the autocast dtype, the softmax in f32 (as matmul and softmax would).
  const Tensor q = autograd::autocast(q_in, AutocastCategory::LowerPrecision);
  const Tensor k = autograd::autocast(k_in, AutocastCategory::LowerPrecision);
  const Tensor v = autograd::autocast(v_in, AutocastCategory::LowerPrecision);
  BRISK_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "scaled_dot_product_attention: q, k and v are ",
              dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()), "; give one dtype");
  if (Tensor y = fused_attention(q, k, v, o.is_causal, scale); y.defined()) return y;

  const DType dt = q.dtype();
  const DType soft_dt = autocast_state().enabled && dt != DType::F64 ? DType::F32 : dt;
  const Tensor qs = kernels::binary_scalar(kernels::BinaryOp::Mul, q.detach(), scale);  // contiguous
  const Tensor kd = k.detach(), vd = v.detach();
  Shape out_shape = q.sizes();
  out_shape.back() = v.size(-1);
  Tensor y = empty(out_shape, dt, q.device());

  const std::vector<Block> blocks = plan_blocks(Tq, Tk, o.is_causal);
  std::vector<Tensor> probs;  // softmax of each block's scores, (..., n, keys), in soft_dt
  probs.reserve(blocks.size());
  for (const Block& b : blocks) {
    Tensor s = kernels::matmul(qs.narrow(-2, b.r0, b.n), kd.narrow(-2, 0, b.keys).transpose(-2, -1));  // (..., n, keys)
    if (s.dtype() != soft_dt) s = kernels::cast(s, soft_dt);
    if (o.is_causal) kernels::add_(s.narrow(-1, b.keys - b.n, b.n), future_bias(b, soft_dt, s.device()));
    Tensor p = kernels::softmax(s, -1);
    kernels::copy_(y.narrow(-2, b.r0, b.n),
                   kernels::matmul(p.dtype() == dt ? p : kernels::cast(p, dt), vd.narrow(-2, 0, b.keys)));
    probs.push_back(std::move(p));
  }
  if (!autograd::any_requires_grad({&q, &k, &v})) return y;

  autograd::record("scaled_dot_product_attention", {q, k, v}, y,
                   [qs, kd, vd, probs, blocks, scale, dt](const autograd::GradCtx& g) -> std::vector<Tensor> {
                     const Tensor& gy = g.grad();
                     Tensor gq = empty(qs.sizes(), dt, qs.device());
                     Tensor gk = zeros(kd.sizes(), {.dtype = dt, .device = kd.device()});
                     Tensor gv = zeros(vd.sizes(), {.dtype = dt, .device = vd.device()});
                     // Blocks in a fixed order, so the sums into gk and gv do not depend on anything else.
                     for (size_t i = 0; i < blocks.size(); ++i) {
                       const Block& b = blocks[i];
                       const Tensor& p = probs[i];
                       const Tensor gyi = gy.narrow(-2, b.r0, b.n);
                       const Tensor vk = vd.narrow(-2, 0, b.keys), kk = kd.narrow(-2, 0, b.keys);
                       Tensor gp = kernels::matmul(gyi, vk.transpose(-2, -1));  // (..., n, keys)
                       if (gp.dtype() != p.dtype()) gp = kernels::cast(gp, p.dtype());
                       Tensor gs = kernels::softmax_backward(gp, p, -1);  // 0 where p is (the future)
                       if (gs.dtype() != dt) gs = kernels::cast(gs, dt);
                       const Tensor p_dt = p.dtype() == dt ? p : kernels::cast(p, dt);
                       kernels::copy_(gq.narrow(-2, b.r0, b.n), kernels::matmul(gs, kk));
                       kernels::add_(gk.narrow(-2, 0, b.keys),
                                     kernels::matmul(gs.transpose(-2, -1), qs.narrow(-2, b.r0, b.n)));
                       kernels::add_(gv.narrow(-2, 0, b.keys), kernels::matmul(p_dt.transpose(-2, -1), gyi));
                     }
                     kernels::mul_scalar_(gq, scale);  // s = (q * scale) k^T
                     return {g.needs(0) ? gq : Tensor(), g.needs(1) ? gk : Tensor(), g.needs(2) ? gv : Tensor()};
                   },
                   {k, v});
  return y;
}

}  // namespace brisk
