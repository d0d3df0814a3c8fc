// Public nn kernels: argument checks (naming the op, shapes and values), layout to contiguous,
// output allocation and the device switch; the loops are in cpu/nn.cpp and cuda/nn_*.cu. On the
// CPU, index and target values are checked here before any write; on CUDA the kernels check
// them on the device, so no op copies indices to the host.
#include "brisk/kernels/nn.h"

#include <cmath>

#include "brisk/kernels/device/dropout.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/util/env.h"
#include "cpu/nn_kernels.h"
#include "cuda/nn.h"

namespace brisk::kernels {

namespace {

DType stat_dtype(DType dt) {
  return dt == DType::F64 ? DType::F64 : DType::F32;
}

void check_index_dtype(const char* op, const char* what, const Tensor& t) {
  BRISK_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, op, ": ", what, " must be i64 or i32, got ",
              dtype_name(t.dtype()), " ", t.sizes());
}

// Index tensor as contiguous i64 (a copy only when it is i32 or strided).
Tensor as_index(const char* op, const char* what, const Tensor& t) {
  check_index_dtype(op, what, t);
  return t.dtype() == DType::I64 ? contiguous(t) : cast(t, DType::I64);
}

Generator& gen_or_default(Generator* g) {
  return g ? *g : default_generator();
}

// A 0-d f64 CPU tensor holding v.
Tensor f64_scalar(double v) {
  Tensor t = empty({}, DType::F64, kCPU);
  *t.data<double>() = v;
  return t;
}

// Shape bookkeeping shared by cross_entropy and nll_loss: input (N, C, d...) or (C).
struct ClassLayout {
  int64_t C = 0, S = 1;
  Tensor input;    // contiguous
  Tensor targets;  // contiguous; on the CPU i64 and validated, on CUDA in its own dtype
};

ClassLayout class_layout(const char* op, const Tensor& input, const Tensor& targets, int64_t ignore_index) {
  BRISK_CHECK(input.defined() && targets.defined(), op, ": undefined input or targets");
  check_float(op, input);
  check_same_device(op, input, targets);
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
  l.input = contiguous(input);
  if (input.device().is_cuda()) {
    check_index_dtype(op, "targets", targets);
    l.targets = contiguous(targets);  // range-checked by the kernels
    return l;
  }
  l.targets = as_index(op, "targets", targets);
  const int64_t* tp = l.targets.data<int64_t>();
  for (int64_t i = 0, end = l.targets.numel(); i < end; ++i) {
    BRISK_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < l.C), op, ": target ", tp[i], " is out of bounds for ",
                l.C, " classes (input ", input.sizes(), ", ignore_index ", ignore_index, ")");
  }
  return l;
}

// The loss tensor of a class loss: per position (targets' shape) for None, else a scalar.
Tensor loss_output(const Tensor& targets, Reduction reduction, DType dt, Device dev) {
  return reduction == Reduction::None ? empty(targets.sizes(), dt, dev) : empty({}, dt, dev);
}

// CPU: reduces per-position losses (a fixed sequential sum) into the result's loss tensor.
void reduce_loss(ClassLossResult& r, const std::vector<double>& rows, const Tensor& targets, int64_t ignore_index,
                 Reduction reduction, const Shape& shape, DType dt) {
  const int64_t* tp = targets.data<int64_t>();
  double count = 0;
  for (int64_t i = 0, end = targets.numel(); i < end; ++i) count += tp[i] != ignore_index ? 1.0 : 0.0;
  r.count = f64_scalar(count);
  if (reduction == Reduction::None) {
    r.loss = cast(from_vector<double>(rows, shape), dt);
    return;
  }
  double total = 0;
  for (double v : rows) total += v;
  if (reduction == Reduction::Mean) total = count > 0 ? total / count : std::nan("");
  r.loss = empty({}, dt, kCPU);
  fill_(r.loss, total);
}

void check_loss_grad(const char* op, const Tensor& grad, const Tensor& targets, const ClassLossResult& fwd,
                     Reduction reduction) {
  BRISK_CHECK(grad.defined(), op, " backward: undefined grad");
  if (reduction == Reduction::None) {
    BRISK_CHECK(grad.sizes() == targets.sizes(), op, " backward: grad ", grad.sizes(), " does not match targets ",
                targets.sizes());
  } else {
    BRISK_CHECK(grad.numel() == 1, op, " backward: expected a scalar grad, got ", grad.sizes());
  }
  BRISK_CHECK(reduction != Reduction::Mean || fwd.count.defined(), op,
              " backward: a mean reduction needs the forward's count of non-ignored targets");
}

// CPU: the gradient scale per position (None) or one for all, including Mean's 1/count.
std::vector<double> loss_scale(const Tensor& grad, const ClassLossResult& fwd, Reduction reduction) {
  if (reduction == Reduction::None) return grad.to_vector<double>();
  double s = grad.item<double>();
  if (reduction == Reduction::Mean) {
    const double count = fwd.count.item<double>();
    s = count > 0 ? s / count : 0.0;
  }
  return {s};
}

// The device's view of a loss gradient: contiguous f64 (per position for None, else one value).
Tensor loss_grad_f64(const Tensor& grad, Reduction reduction) {
  Tensor g = grad.dtype() == DType::F64 ? contiguous(grad) : cast(grad, DType::F64);
  return reduction == Reduction::None ? g : g.as_strided({}, {}, g.offset());
}

}  // namespace

// --- embedding ---------------------------------------------------------------------------

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  BRISK_CHECK(indices.defined() && weight.defined(), "embedding: undefined indices or weight");
  BRISK_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got ", weight.sizes());
  check_same_device("embedding", indices, weight);
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  if (weight.device().is_cuda()) {
    check_index_dtype("embedding", "indices", indices);
    cuda::embedding(contiguous(weight), contiguous(indices), out);
    return out;
  }
  Tensor idx = as_index("embedding", "indices", indices);
  const int64_t V = weight.size(0);
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0, end = idx.numel(); i < end; ++i)
    BRISK_CHECK(ip[i] >= 0 && ip[i] < V, "embedding: index ", ip[i], " is out of range for weight ", weight.sizes(),
                " with ", V, " rows");
  cpu::embedding(idx, contiguous(weight), out);
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  check_float("embedding backward", grad);
  check_same_device("embedding backward", grad, indices);
  check_index_dtype("embedding backward", "indices", indices);
  BRISK_CHECK(grad.dim() == indices.dim() + 1 && Shape(grad.sizes().begin(), grad.sizes().end() - 1) == indices.sizes(),
              "embedding backward: grad ", grad.sizes(), " does not match indices ", indices.sizes());
  BRISK_CHECK(num_weights >= 0, "embedding backward: num_weights must be non-negative, got ", num_weights);
  Tensor out = empty({num_weights, grad.size(-1)}, grad.dtype(), grad.device());
  if (grad.device().is_cuda()) {
    cuda::embedding_backward(contiguous(grad), contiguous(indices), padding_idx, out);
    return out;
  }
  Tensor idx = as_index("embedding backward", "indices", indices);
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0, end = idx.numel(); i < end; ++i)
    BRISK_CHECK(ip[i] >= 0 && ip[i] < num_weights, "embedding backward: index ", ip[i], " is out of range for ",
                num_weights, " rows");
  cpu::embedding_backward(contiguous(grad), idx, padding_idx, out);
  return out;
}

// --- layer norm ------------------------------------------------------------------------

namespace {

// layer_norm's argument checks (also add_layer_norm's, on x): the message names `op`.
void check_layer_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                      const Tensor& bias, double eps) {
  BRISK_CHECK(x.defined(), op, ": undefined input");
  check_float(op, x);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  BRISK_CHECK(k >= 1 && x.dim() >= k && Shape(x.sizes().end() - k, x.sizes().end()) == normalized_shape, op,
              ": normalized_shape ", normalized_shape, " does not match the trailing dims of input ", x.sizes());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    BRISK_CHECK(p->sizes() == normalized_shape, op, ": ", what, " ", p->sizes(), " must have normalized_shape ",
                normalized_shape);
    BRISK_CHECK(p->dtype() == x.dtype(), op, ": dtype mismatch: input ", dtype_name(x.dtype()), " vs ", what, " ",
                dtype_name(p->dtype()));
    check_same_device(op, x, *p);
  }
  BRISK_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
}

// The outputs of a layer norm of x over normalized_shape: y like x, mean and rstd per row.
LayerNormResult layer_norm_outputs(const Tensor& x, const Shape& normalized_shape) {
  const int64_t D = shape_numel(normalized_shape);
  const int64_t R = D ? x.numel() / D : 0;
  return {empty(x.sizes(), x.dtype(), x.device()), empty({R}, stat_dtype(x.dtype()), x.device()),
          empty({R}, stat_dtype(x.dtype()), x.device())};
}

// Layer norm's gradients: each asked for, x's dtype; weight's shape, or (D) without weight.
LayerNormGrads layer_norm_grads(const Tensor& x, const Tensor& mean, const Tensor& weight, std::array<bool, 3> needs) {
  const int64_t R = mean.numel();
  const int64_t D = R ? x.numel() / R : 0;
  const Shape wshape = weight.defined() ? weight.sizes() : Shape{D};
  LayerNormGrads g;
  if (needs[0]) g.dx = empty(x.sizes(), x.dtype(), x.device());
  if (needs[1]) g.dweight = empty(wshape, x.dtype(), x.device());
  if (needs[2]) g.dbias = empty(wshape, x.dtype(), x.device());
  if (R == 0 || D == 0)
    for (Tensor* t : {&g.dx, &g.dweight, &g.dbias})
      if (t->defined()) fill_(*t, 0.0);
  return g;
}

// A gradient in x's dtype, contiguous.
Tensor grad_like(const Tensor& grad, const Tensor& x) {
  return grad.dtype() == x.dtype() ? contiguous(grad) : cast(grad, x.dtype());
}

}  // namespace

LayerNormResult layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps) {
  check_layer_norm("layer_norm", x, normalized_shape, weight, bias, eps);
  LayerNormResult r = layer_norm_outputs(x, normalized_shape);
  const Tensor w = weight.defined() ? contiguous(weight) : weight, b = bias.defined() ? contiguous(bias) : bias;
  if (x.device().is_cuda())
    cuda::layer_norm(contiguous(x), w, b, eps, r.y, r.mean, r.rstd);
  else
    cpu::layer_norm(contiguous(x), w, b, eps, r.y, r.mean, r.rstd);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, std::array<bool, 3> needs) {
  BRISK_CHECK(grad.sizes() == x.sizes(), "layer_norm backward: grad ", grad.sizes(), " does not match input ",
              x.sizes());
  check_same_device("layer_norm backward", grad, x);
  LayerNormGrads g = layer_norm_grads(x, mean, weight, needs);
  if (x.numel() == 0 || mean.numel() == 0) return g;
  const Tensor gc = grad_like(grad, x);
  const Tensor w = weight.defined() ? contiguous(weight) : weight;
  if (x.device().is_cuda())
    cuda::layer_norm_backward(gc, contiguous(x), mean, rstd, w, g.dx, g.dweight, g.dbias);
  else
    cpu::layer_norm_backward(gc, contiguous(x), mean, rstd, w, g.dx, g.dweight, g.dbias);
  return g;
}

// --- residual add + layer norm -------------------------------------------------------------

bool fused_residual_layer_norm_enabled() {
  return envvar::get_bool("BRISK_CUDA_FUSED_RESIDUAL_LN", true);
}

AddLayerNormResult add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                  const Tensor& weight, const Tensor& bias, double eps) {
  BRISK_CHECK(x.defined() && residual.defined(), "add_layer_norm: undefined input or residual");
  BRISK_CHECK(x.sizes() == residual.sizes(), "add_layer_norm: input ", x.sizes(), " and residual ", residual.sizes(),
              " must have the same shape");
  BRISK_CHECK(x.dtype() == residual.dtype(), "add_layer_norm: dtype mismatch: input ", dtype_name(x.dtype()),
              " vs residual ", dtype_name(residual.dtype()), " (shape ", x.sizes(), ")");
  BRISK_CHECK(x.device() == residual.device(), "add_layer_norm: input ", x.sizes(), " is on ", x.device().str(),
              " and residual ", residual.sizes(), " on ", residual.device().str(), " (move them with .to(device))");
  check_layer_norm("add_layer_norm", x, normalized_shape, weight, bias, eps);
  AddLayerNormResult r;
  if (x.device().is_cuda() && !fused_residual_layer_norm_enabled()) {
    r.h = binary(BinaryOp::Add, x, residual);
    LayerNormResult l = layer_norm(r.h, normalized_shape, weight, bias, eps);
    r.y = l.y;
    r.mean = l.mean;
    r.rstd = l.rstd;
    return r;
  }
  LayerNormResult l = layer_norm_outputs(x, normalized_shape);
  r.h = empty(x.sizes(), x.dtype(), x.device());
  r.y = l.y;
  r.mean = l.mean;
  r.rstd = l.rstd;
  const Tensor w = weight.defined() ? contiguous(weight) : weight, b = bias.defined() ? contiguous(bias) : bias;
  if (x.device().is_cuda())
    cuda::add_layer_norm(contiguous(x), contiguous(residual), w, b, eps, r.h, r.y, r.mean, r.rstd);
  else
    cpu::add_layer_norm(contiguous(x), contiguous(residual), w, b, eps, r.h, r.y, r.mean, r.rstd);
  return r;
}

LayerNormGrads add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& weight, std::array<bool, 3> needs) {
  BRISK_CHECK(grad_y.defined() && h.defined(), "add_layer_norm backward: undefined grad or input");
  BRISK_CHECK(grad_y.sizes() == h.sizes(), "add_layer_norm backward: grad ", grad_y.sizes(), " does not match input ",
              h.sizes());
  check_same_device("add_layer_norm backward", grad_y, h);
  if (grad_h.defined()) {
    BRISK_CHECK(grad_h.sizes() == h.sizes(), "add_layer_norm backward: grad of the sum ", grad_h.sizes(),
                " does not match input ", h.sizes());
    check_same_device("add_layer_norm backward", grad_h, h);
  }
  if (h.device().is_cuda() && !fused_residual_layer_norm_enabled()) {
    LayerNormGrads g = layer_norm_backward(grad_y, h, mean, rstd, weight, needs);
    if (g.dx.defined() && grad_h.defined()) g.dx = binary(BinaryOp::Add, g.dx, grad_like(grad_h, h));
    return g;
  }
  LayerNormGrads g = layer_norm_grads(h, mean, weight, needs);
  if (h.numel() == 0 || mean.numel() == 0) return g;
  const Tensor gy = grad_like(grad_y, h), gh = grad_h.defined() ? grad_like(grad_h, h) : grad_h;
  const Tensor w = weight.defined() ? contiguous(weight) : weight;
  if (h.device().is_cuda())
    cuda::add_layer_norm_backward(gy, gh, contiguous(h), mean, rstd, w, g.dx, g.dweight, g.dbias);
  else
    cpu::add_layer_norm_backward(gy, gh, contiguous(h), mean, rstd, w, g.dx, g.dweight, g.dbias);
  return g;
}

// --- batch norm ------------------------------------------------------------------------

BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps) {
  BRISK_CHECK(x.defined(), "batch_norm: undefined input");
  check_float("batch_norm", x);
  BRISK_CHECK(x.dim() >= 2, "batch_norm: input must be (N, C, ...) with at least 2 dims, got shape ", x.sizes());
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = shape_numel(Shape(x.sizes().begin() + 2, x.sizes().end()));
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var}) {
    if (!p->defined()) continue;
    const char* what = p == &weight         ? "weight"
                       : p == &bias         ? "bias"
                       : p == &running_mean ? "running_mean"
                                            : "running_var";
    BRISK_CHECK(p->sizes() == Shape{C}, "batch_norm: ", what, " ", p->sizes(), " must have shape [", C,
                "] (the channels of input ", x.sizes(), ")");
    BRISK_CHECK(p->dtype() == x.dtype(), "batch_norm: dtype mismatch: input ", dtype_name(x.dtype()), " vs ", what, " ",
                dtype_name(p->dtype()));
    check_same_device("batch_norm", x, *p);
  }
  BRISK_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: running_mean and running_var must be given together");
  BRISK_CHECK(training || running_mean.defined(), "batch_norm: eval mode needs running_mean and running_var");
  BRISK_CHECK(eps >= 0, "batch_norm: eps must be non-negative, got ", eps);
  BRISK_CHECK(momentum >= 0 && momentum <= 1, "batch_norm: momentum must be in [0, 1], got ", momentum);
  if (training) {
    const int64_t per_channel = N * S;
    BRISK_CHECK(per_channel > 1 || (per_channel == 1 && !running_mean.defined()),
                "batch_norm: expected more than 1 value per channel when training, got input of shape ", x.sizes());
  }
  BatchNormResult r;
  r.y = empty(x.sizes(), x.dtype(), x.device());
  r.save_mean = empty({C}, stat_dtype(x.dtype()), x.device());
  r.save_invstd = empty({C}, stat_dtype(x.dtype()), x.device());
  const Tensor w = weight.defined() ? contiguous(weight) : weight, b = bias.defined() ? contiguous(bias) : bias;
  // The running statistics are updated in place, so they are written through when strided.
  const Tensor rm = running_mean.defined() ? contiguous(running_mean) : running_mean;
  const Tensor rv = running_var.defined() ? contiguous(running_var) : running_var;
  if (x.device().is_cuda()) {
    cuda::batch_norm(contiguous(x), N, C, S, w, b, rm, rv, training, momentum, eps, r.y, r.save_mean, r.save_invstd);
  } else {
    cpu::batch_norm(contiguous(x), N, C, S, w, b, rm, rv, training, momentum, eps, r.y, r.save_mean, r.save_invstd);
  }
  if (training) {
    for (auto [work, orig] : {std::pair{&rm, &running_mean}, std::pair{&rv, &running_var}}) {
      if (!orig->defined()) continue;
      if (!work->is_same(*orig))
        copy_(*orig, *work);
      else
        orig->bump_version();
    }
  }
  return r;
}

BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                                   const Tensor& save_invstd, bool training, std::array<bool, 3> needs) {
  BRISK_CHECK(grad.defined() && x.defined(), "batch_norm backward: undefined grad or input");
  BRISK_CHECK(x.dim() >= 2, "batch_norm backward: input must have at least 2 dims, got shape ", x.sizes());
  BRISK_CHECK(grad.sizes() == x.sizes(), "batch_norm backward: grad ", grad.sizes(), " does not match input ",
              x.sizes());
  check_same_device("batch_norm backward", grad, x);
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = shape_numel(Shape(x.sizes().begin() + 2, x.sizes().end()));
  BRISK_CHECK(save_mean.numel() == C && save_invstd.numel() == C && save_mean.dtype() == stat_dtype(x.dtype()) &&
                  save_invstd.dtype() == stat_dtype(x.dtype()),
              "batch_norm backward: save_mean ", save_mean.sizes(), " and save_invstd ", save_invstd.sizes(),
              " must be the forward's (", C, ") ", dtype_name(stat_dtype(x.dtype())), " statistics");
  BRISK_CHECK(!weight.defined() || (weight.sizes() == Shape{C} && weight.dtype() == x.dtype()),
              "batch_norm backward: weight ", weight.defined() ? weight.sizes() : Shape{}, " must be (", C, ") of ",
              dtype_name(x.dtype()));
  BatchNormGrads g;
  if (needs[0]) g.dx = empty(x.sizes(), x.dtype(), x.device());
  if (needs[1]) g.dweight = empty({C}, x.dtype(), x.device());
  if (needs[2]) g.dbias = empty({C}, x.dtype(), x.device());
  Tensor gc = grad.dtype() == x.dtype() ? contiguous(grad) : cast(grad, x.dtype());
  const Tensor w = weight.defined() ? contiguous(weight) : weight;
  const Tensor sm = contiguous(save_mean), si = contiguous(save_invstd);
  if (x.device().is_cuda()) {
    cuda::batch_norm_backward(gc, contiguous(x), N, C, S, w, sm, si, training, g.dx, g.dweight, g.dbias);
  } else {
    cpu::batch_norm_backward(gc, contiguous(x), N, C, S, w, sm, si, training, g.dx, g.dweight, g.dbias);
  }
  return g;
}

// --- dropout -------------------------------------------------------------------------------

DropoutResult dropout(const Tensor& x, double p, Generator* gen) {
  BRISK_CHECK(x.defined(), "dropout: undefined input");
  BRISK_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  check_float("dropout", x);
  DropoutResult r;
  r.y = empty(x.sizes(), x.dtype(), x.device());
  r.mask = empty(x.sizes(), DType::Bool, x.device());
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(device::dropout_counters(x.numel()));
  if (x.device().is_cuda())
    cuda::dropout(contiguous(x), p, seed, base, r.y, r.mask);
  else
    cpu::dropout(contiguous(x), p, seed, base, r.y, r.mask);
  return r;
}

Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p) {
  BRISK_CHECK(grad.defined() && mask.defined(), "dropout backward: undefined grad or mask");
  BRISK_CHECK(grad.sizes() == mask.sizes(), "dropout backward: grad ", grad.sizes(), " does not match mask ",
              mask.sizes());
  BRISK_CHECK(mask.dtype() == DType::Bool, "dropout backward: mask must be bool, got ", dtype_name(mask.dtype()));
  check_float("dropout backward", grad);
  check_same_device("dropout backward", grad, mask);
  Tensor out = empty(grad.sizes(), grad.dtype(), grad.device());
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  if (grad.device().is_cuda())
    cuda::dropout_backward(grad, mask, scale, out);
  else
    cpu::dropout_backward(contiguous(grad), contiguous(mask), scale, out);
  return out;
}

// --- class losses ----------------------------------------------------------------------------

ClassLossResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                              Reduction reduction, std::optional<DType> loss_dtype) {
  BRISK_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  ClassLayout l = class_layout("cross_entropy", logits, targets, ignore_index);
  BRISK_CHECK(l.C > 0, "cross_entropy: input ", logits.sizes(), " has no classes");
  const DType loss_dt = loss_dtype.value_or(logits.dtype());
  BRISK_CHECK(loss_dt == logits.dtype() ||
                  (loss_dt == DType::F32 && (logits.dtype() == DType::F16 || logits.dtype() == DType::BF16)),
              "cross_entropy: loss_dtype ", dtype_name(loss_dt), " must be the logits' (", dtype_name(logits.dtype()),
              "), or f32 for f16/bf16 logits");
  ClassLossResult r;
  r.lse = empty({l.targets.numel()}, stat_dtype(logits.dtype()), logits.device());
  if (logits.device().is_cuda()) {
    r.loss = loss_output(targets, reduction, loss_dt, logits.device());
    r.count = empty({}, DType::F64, logits.device());
    cuda::cross_entropy(l.input, l.targets, l.C, l.S, ignore_index, label_smoothing, reduction, r.loss, r.lse, r.count);
    return r;
  }
  std::vector<double> rows(static_cast<size_t>(l.targets.numel()));
  cpu::cross_entropy(l.input, l.targets, l.C, l.S, ignore_index, label_smoothing, rows.data(), r.lse);
  reduce_loss(r, rows, l.targets, ignore_index, reduction, targets.sizes(), loss_dt);
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets,
                              const ClassLossResult& fwd, int64_t ignore_index, double label_smoothing,
                              Reduction reduction, const Tensor& out_in) {
  ClassLayout l = class_layout("cross_entropy backward", logits, targets, ignore_index);
  check_loss_grad("cross_entropy", grad, targets, fwd, reduction);
  BRISK_CHECK(fwd.lse.defined() && fwd.lse.numel() == l.targets.numel(),
              "cross_entropy backward: needs the forward's log-sum-exp per position");
  BRISK_CHECK(!out_in.defined() || (out_in.sizes() == logits.sizes() && out_in.dtype() == logits.dtype() &&
                                    out_in.device() == logits.device() && out_in.is_contiguous()),
              "cross_entropy backward: out must be contiguous with the logits' shape ", logits.sizes(), ", dtype ",
              dtype_name(logits.dtype()), " and device ", logits.device().str());
  Tensor out = out_in.defined() ? out_in : empty(logits.sizes(), logits.dtype(), logits.device());
  if (logits.device().is_cuda()) {
    check_same_device("cross_entropy backward", logits, grad);
    cuda::cross_entropy_backward(loss_grad_f64(grad, reduction), l.input, l.targets, contiguous(fwd.lse), fwd.count,
                                 l.C, l.S, ignore_index, label_smoothing, reduction, out);
    return out;
  }
  std::vector<double> scale = loss_scale(grad, fwd, reduction);
  cpu::cross_entropy_backward(l.input, l.targets, fwd.lse, l.C, l.S, ignore_index, label_smoothing, scale.data(),
                              static_cast<int64_t>(scale.size()), out);
  return out;
}

ClassLossResult nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  ClassLayout l = class_layout("nll_loss", log_probs, targets, ignore_index);
  ClassLossResult r;
  if (log_probs.device().is_cuda()) {
    r.loss = loss_output(targets, reduction, log_probs.dtype(), log_probs.device());
    r.count = empty({}, DType::F64, log_probs.device());
    cuda::nll_loss(l.input, l.targets, l.C, l.S, ignore_index, reduction, r.loss, r.count);
    return r;
  }
  std::vector<double> rows(static_cast<size_t>(l.targets.numel()));
  cpu::nll_loss(l.input, l.targets, l.C, l.S, ignore_index, rows.data());
  reduce_loss(r, rows, l.targets, ignore_index, reduction, targets.sizes(), log_probs.dtype());
  return r;
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets, const ClassLossResult& fwd,
                         int64_t ignore_index, Reduction reduction) {
  BRISK_CHECK(log_probs.defined() && targets.defined(), "nll_loss backward: undefined input or targets");
  check_same_device("nll_loss backward", log_probs, targets);
  check_loss_grad("nll_loss", grad, targets, fwd, reduction);
  const int64_t C = log_probs.dim() == 1 ? log_probs.size(0) : log_probs.size(1);
  const int64_t S = log_probs.dim() <= 2 ? 1 : log_probs.numel() / std::max<int64_t>(1, log_probs.size(0) * C);
  Tensor out = empty(log_probs.sizes(), log_probs.dtype(), log_probs.device());
  if (log_probs.device().is_cuda()) {
    check_index_dtype("nll_loss backward", "targets", targets);
    cuda::nll_loss_backward(loss_grad_f64(grad, reduction), contiguous(targets), fwd.count, C, S, ignore_index,
                            reduction, out);
    return out;
  }
  Tensor t = as_index("nll_loss backward", "targets", targets);
  std::vector<double> scale = loss_scale(grad, fwd, reduction);
  cpu::nll_loss_backward(t, C, S, ignore_index, scale.data(), static_cast<int64_t>(scale.size()), out);
  return out;
}

}  // namespace brisk::kernels
