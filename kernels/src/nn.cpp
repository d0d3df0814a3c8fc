// Public nn kernels: argument checks (naming the op, shapes and values), layout to contiguous,
// output allocation and the device switch; the loops are in cpu/nn.cpp.
#include "brisk/kernels/nn.h"

#include <cmath>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "cpu/nn_kernels.h"

namespace brisk::kernels {

namespace {

DType stat_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

// Index tensor as contiguous i64 (a copy only when it is i32 or strided).
Tensor as_index(const char* op, const char* what, const Tensor& t) {
  BRISK_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, op, ": ", what, " must be i64 or i32, got ",
              dtype_name(t.dtype()), " ", t.sizes());
  return t.dtype() == DType::I64 ? contiguous(t) : cast(t, DType::I64);
}

Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }

// Shape bookkeeping shared by cross_entropy and nll_loss: input (N, C, d...) or (C).
struct ClassLayout {
  int64_t C = 0, S = 1;
  Tensor input;    // contiguous
  Tensor targets;  // contiguous i64, validated
};

ClassLayout class_layout(const char* op, const Tensor& input, const Tensor& targets, int64_t ignore_index) {
  BRISK_CHECK(input.defined() && targets.defined(), op, ": undefined input or targets");
  check_float(op, input);
  check_same_device(op, input, targets);
  require_cpu(op, input);
  BRISK_CHECK(input.dim() >= 1, op, ": input must be (C) or (N, C, d1, ...), got a scalar");
  ClassLayout l;
  Shape expected;
  if (input.dim() == 1) {
    l.C = input.size(0);
  } else {
    l.C = input.size(1);
    expected.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) {
      expected.push_back(input.size(d));
      l.S *= input.size(d);
    }
  }
  BRISK_CHECK(targets.sizes() == expected, op, ": targets ", targets.sizes(), " do not match input ", input.sizes(),
              " (expected targets of shape ", expected, ")");
  l.targets = as_index(op, "targets", targets);
  const int64_t* tp = l.targets.data<int64_t>();
  for (int64_t i = 0; i < l.targets.numel(); ++i) {
    BRISK_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < l.C), op, ": target ", tp[i],
                " is out of bounds for ", l.C, " classes (input ", input.sizes(), ", ignore_index ", ignore_index, ")");
  }
  l.input = contiguous(input);
  return l;
}

// Reduces per-position losses (a fixed sequential sum) into the result's loss tensor.
void reduce_loss(ClassLossResult& r, const std::vector<double>& rows, const Tensor& targets, int64_t ignore_index,
                 Reduction reduction, const Shape& shape, DType dt) {
  const int64_t* tp = targets.data<int64_t>();
  r.count = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) r.count += tp[i] != ignore_index ? 1.0 : 0.0;
  if (reduction == Reduction::None) {
    r.loss = cast(from_vector<double>(rows, shape), dt);
    return;
  }
  double total = 0;
  for (double v : rows) total += v;
  if (reduction == Reduction::Mean) total = r.count > 0 ? total / r.count : std::nan("");
  r.loss = empty({}, dt, kCPU);
  fill_(r.loss, total);
}

// The gradient scale per position (None) or one for all, including Mean's 1/count.
std::vector<double> loss_scale(const char* op, const Tensor& grad, const Tensor& targets, const ClassLossResult& fwd,
                               Reduction reduction) {
  if (reduction == Reduction::None) {
    BRISK_CHECK(grad.sizes() == targets.sizes(), op, " backward: grad ", grad.sizes(), " does not match targets ",
                targets.sizes());
    return grad.to_vector<double>();
  }
  BRISK_CHECK(grad.numel() == 1, op, " backward: expected a scalar grad, got ", grad.sizes());
  double s = grad.item<double>();
  if (reduction == Reduction::Mean) s = fwd.count > 0 ? s / fwd.count : 0.0;
  return {s};
}

}  // namespace

// --- embedding ---------------------------------------------------------------------------

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  BRISK_CHECK(indices.defined() && weight.defined(), "embedding: undefined indices or weight");
  BRISK_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got ",
              weight.sizes());
  check_same_device("embedding", indices, weight);
  require_cpu("embedding", weight);
  Tensor idx = as_index("embedding", "indices", indices);
  const int64_t V = weight.size(0);
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    BRISK_CHECK(ip[i] >= 0 && ip[i] < V, "embedding: index ", ip[i], " is out of range for weight ", weight.sizes(),
                " with ", V, " rows");
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  cpu::embedding(idx, contiguous(weight), out);
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  check_float("embedding backward", grad);
  require_cpu("embedding backward", grad);
  Tensor idx = as_index("embedding backward", "indices", indices);
  BRISK_CHECK(grad.dim() == indices.dim() + 1 && Shape(grad.sizes().begin(), grad.sizes().end() - 1) == indices.sizes(),
              "embedding backward: grad ", grad.sizes(), " does not match indices ", indices.sizes());
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    BRISK_CHECK(ip[i] >= 0 && ip[i] < num_weights, "embedding backward: index ", ip[i], " is out of range for ",
                num_weights, " rows");
  Tensor out = empty({num_weights, grad.size(-1)}, grad.dtype(), grad.device());
  cpu::embedding_backward(contiguous(grad), idx, padding_idx, out);
  return out;
}

// --- layer norm ------------------------------------------------------------------------

LayerNormResult layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps) {
  BRISK_CHECK(x.defined(), "layer_norm: undefined input");
  check_float("layer_norm", x);
  require_cpu("layer_norm", x);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  BRISK_CHECK(k >= 1 && x.dim() >= k &&
                  Shape(x.sizes().end() - k, x.sizes().end()) == normalized_shape,
              "layer_norm: normalized_shape ", normalized_shape, " does not match the trailing dims of input ",
              x.sizes());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    BRISK_CHECK(p->sizes() == normalized_shape, "layer_norm: ", what, " ", p->sizes(), " must have normalized_shape ",
                normalized_shape);
    BRISK_CHECK(p->dtype() == x.dtype(), "layer_norm: dtype mismatch: input ", dtype_name(x.dtype()), " vs ", what,
                " ", dtype_name(p->dtype()));
    check_same_device("layer_norm", x, *p);
  }
  BRISK_CHECK(eps >= 0, "layer_norm: eps must be non-negative, got ", eps);
  const int64_t D = shape_numel(normalized_shape);
  const int64_t R = D ? x.numel() / D : 0;
  LayerNormResult r;
  r.y = empty(x.sizes(), x.dtype(), x.device());
  r.mean = empty({R}, stat_dtype(x.dtype()), x.device());
  r.rstd = empty({R}, stat_dtype(x.dtype()), x.device());
  cpu::layer_norm(contiguous(x), weight.defined() ? contiguous(weight) : weight,
                  bias.defined() ? contiguous(bias) : bias, eps, r.y, r.mean, r.rstd);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, std::array<bool, 3> needs) {
  require_cpu("layer_norm backward", x);
  BRISK_CHECK(grad.sizes() == x.sizes(), "layer_norm backward: grad ", grad.sizes(), " does not match input ",
              x.sizes());
  const int64_t R = mean.numel();
  const int64_t D = R ? x.numel() / R : 0;
  Shape wshape = weight.defined() ? weight.sizes() : Shape{D};
  LayerNormGrads g;
  if (needs[0]) g.dx = empty(x.sizes(), x.dtype(), x.device());
  if (needs[1]) g.dweight = empty(wshape, x.dtype(), x.device());
  if (needs[2]) g.dbias = empty(wshape, x.dtype(), x.device());
  Tensor gc = grad.dtype() == x.dtype() ? contiguous(grad) : cast(grad, x.dtype());
  if (R == 0 || D == 0) {
    for (Tensor* t : {&g.dx, &g.dweight, &g.dbias})
      if (t->defined()) fill_(*t, 0.0);
    return g;
  }
  cpu::layer_norm_backward(gc, contiguous(x), mean, rstd, weight.defined() ? contiguous(weight) : weight, g.dx,
                           g.dweight, g.dbias);
  return g;
}

// --- dropout -------------------------------------------------------------------------------

DropoutResult dropout(const Tensor& x, double p, Generator* gen) {
  BRISK_CHECK(x.defined(), "dropout: undefined input");
  BRISK_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  check_float("dropout", x);
  require_cpu("dropout", x);
  DropoutResult r;
  r.y = empty(x.sizes(), x.dtype(), x.device());
  r.mask = empty(x.sizes(), DType::Bool, x.device());
  Generator& g = gen_or_default(gen);
  const uint64_t n = static_cast<uint64_t>(x.numel());
  const uint64_t seed = g.seed(), base = g.reserve((n + 3) / 4);
  cpu::dropout(contiguous(x), p, seed, base, r.y, r.mask);
  return r;
}

Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p) {
  require_cpu("dropout backward", grad);
  BRISK_CHECK(grad.sizes() == mask.sizes(), "dropout backward: grad ", grad.sizes(), " does not match mask ",
              mask.sizes());
  Tensor out = empty(grad.sizes(), grad.dtype(), grad.device());
  cpu::dropout_backward(contiguous(grad), contiguous(mask), p < 1.0 ? 1.0 / (1.0 - p) : 0.0, out);
  return out;
}

// --- class losses ----------------------------------------------------------------------------

Reduction reduction_from_name(std::string_view name, const char* op) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  BRISK_THROW(op, ": reduction must be \"mean\", \"sum\" or \"none\", got \"", name, "\"");
}

ClassLossResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                              double label_smoothing, Reduction reduction) {
  BRISK_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  ClassLayout l = class_layout("cross_entropy", logits, targets, ignore_index);
  BRISK_CHECK(l.C > 0, "cross_entropy: input ", logits.sizes(), " has no classes");
  ClassLossResult r;
  std::vector<double> rows(static_cast<size_t>(l.targets.numel()));
  r.lse = empty({l.targets.numel()}, stat_dtype(logits.dtype()), logits.device());
  cpu::cross_entropy(l.input, l.targets, l.C, l.S, ignore_index, label_smoothing, rows.data(), r.lse);
  reduce_loss(r, rows, l.targets, ignore_index, reduction, targets.sizes(), logits.dtype());
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets,
                              const ClassLossResult& fwd, int64_t ignore_index, double label_smoothing,
                              Reduction reduction) {
  ClassLayout l = class_layout("cross_entropy backward", logits, targets, ignore_index);
  std::vector<double> scale = loss_scale("cross_entropy", grad, targets, fwd, reduction);
  Tensor out = empty(logits.sizes(), logits.dtype(), logits.device());
  cpu::cross_entropy_backward(l.input, l.targets, fwd.lse, l.C, l.S, ignore_index, label_smoothing, scale.data(),
                              static_cast<int64_t>(scale.size()), out);
  return out;
}

ClassLossResult nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  ClassLayout l = class_layout("nll_loss", log_probs, targets, ignore_index);
  ClassLossResult r;
  std::vector<double> rows(static_cast<size_t>(l.targets.numel()));
  cpu::nll_loss(l.input, l.targets, l.C, l.S, ignore_index, rows.data());
  reduce_loss(r, rows, l.targets, ignore_index, reduction, targets.sizes(), log_probs.dtype());
  return r;
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets, const ClassLossResult& fwd,
                         int64_t ignore_index, Reduction reduction) {
  require_cpu("nll_loss backward", log_probs);
  Tensor t = as_index("nll_loss backward", "targets", targets);
  const int64_t C = log_probs.dim() == 1 ? log_probs.size(0) : log_probs.size(1);
  const int64_t S = log_probs.dim() <= 2 ? 1 : log_probs.numel() / std::max<int64_t>(1, log_probs.size(0) * C);
  std::vector<double> scale = loss_scale("nll_loss", grad, targets, fwd, reduction);
  Tensor out = empty(log_probs.sizes(), log_probs.dtype(), log_probs.device());
  cpu::nll_loss_backward(t, C, S, ignore_index, scale.data(), static_cast<int64_t>(scale.size()), out);
  return out;
}

}  // namespace brisk::kernels
