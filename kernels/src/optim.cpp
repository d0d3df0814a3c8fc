// Public fused optimizer kernels: argument checks, then one switch on the device to cpu/ or cuda/.
#include "brisk/kernels/optim.h"

#include <cmath>
#include <string>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "cpu/optim_cpu.h"
#include "cuda/optim.h"

namespace brisk::kernels {

namespace {

// Every parameter contiguous, floating, on one device and of one dtype; every state list empty
// or one tensor per parameter with the parameter's shape, dtype and device.
void check_group(const char* op, const std::vector<Tensor>& params,
                 const std::vector<const std::vector<Tensor>*>& others) {
  for (const auto* v : others)
    BRISK_CHECK(v->empty() || v->size() == params.size(), op, ": got ", v->size(), " state tensors for ", params.size(),
                " parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    BRISK_CHECK(p.defined(), op, ": parameter ", i, " is undefined");
    check_float(op, p);
    BRISK_CHECK(p.is_contiguous(), op, ": parameter ", i, " (shape ", p.sizes(), ") must be contiguous");
    BRISK_CHECK(p.dtype() == params[0].dtype() && p.device() == params[0].device(), op, ": parameter ", i, " is ",
                dtype_name(p.dtype()), " on ", p.device().str(), " but parameter 0 is ", dtype_name(params[0].dtype()),
                " on ", params[0].device().str(), "; call once per dtype and device");
    for (const auto* v : others) {
      if (v->empty()) continue;
      const Tensor& s = (*v)[i];
      BRISK_CHECK(s.defined() && s.sizes() == p.sizes() && s.is_contiguous(), op, ": tensor for parameter ", i,
                  " has shape ", s.defined() ? s.sizes() : Shape{},
                  " (or is not contiguous) but the parameter has shape ", p.sizes());
      BRISK_CHECK(s.dtype() == p.dtype() && s.device() == p.device(), op, ": tensor for parameter ", i, " is ",
                  dtype_name(s.dtype()), " on ", s.device().str(), " but the parameter is ", dtype_name(p.dtype()),
                  " on ", p.device().str());
    }
  }
}

// A list for the reductions and in-place scalings: defined, contiguous, floating, one device
// (dtypes may differ). Returns that device (the CPU for an empty list).
Device check_list(const char* op, const std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    BRISK_CHECK(t.defined(), op, ": tensor ", i, " is undefined");
    check_float(op, t);
    BRISK_CHECK(t.is_contiguous(), op, ": needs contiguous tensors; tensor ", i, " has shape ", t.sizes(), " strides ",
                t.strides());
    BRISK_CHECK(t.device() == ts[0].device(), op, ": tensor ", i, " is on ", t.device().str(), " but tensor 0 on ",
                ts[0].device().str());
  }
  return ts.empty() ? kCPU : ts[0].device();
}

// Empty, or one contiguous f16/bf16 tensor (all of one dtype) per f32 parameter, shaped like it
// and on its device.
void check_copies(const char* op, const std::vector<Tensor>& params, const std::vector<Tensor>& copies) {
  if (copies.empty()) return;
  BRISK_CHECK(copies.size() == params.size(), op, ": got ", copies.size(), " low-precision copies for ", params.size(),
              " parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor& c = copies[i];
    BRISK_CHECK(p.dtype() == DType::F32, op, ": low-precision copies are written for f32 parameters; parameter ", i,
                " is ", dtype_name(p.dtype()));
    BRISK_CHECK(c.defined() && (c.dtype() == DType::BF16 || c.dtype() == DType::F16) &&
                    c.dtype() == copies[0].dtype() && c.is_contiguous() && c.sizes() == p.sizes() &&
                    c.device() == p.device(),
                op, ": low-precision copy ", i, " must be a contiguous f16 or bf16 tensor (one dtype for all) shaped ",
                p.sizes(), " on ", p.device().str(), "; got ", c.defined() ? dtype_name(c.dtype()) : "undefined", " ",
                c.defined() ? c.sizes() : Shape{}, c.defined() ? " on " + c.device().str() : std::string());
  }
}

void bump_versions(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) t.bump_version();
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h) {
  check_group("sgd_step", params, {&grads, &momentum_bufs});
  BRISK_CHECK(grads.size() == params.size(), "sgd_step: got ", grads.size(), " gradients for ", params.size(),
              " parameters");
  BRISK_CHECK(h.momentum == 0 || momentum_bufs.size() == params.size(), "sgd_step: momentum ", h.momentum,
              " needs one momentum buffer per parameter, got ", momentum_bufs.size());
  if (params.empty()) return;
  if (params[0].device().is_cuda())
    cuda::sgd_step(params, grads, momentum_bufs, h);
  else
    cpu::sgd_step(params, grads, momentum_bufs, h);
  bump_versions(params);
  if (h.momentum != 0) bump_versions(momentum_bufs);
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
               const std::vector<Tensor>& low_precision_copies) {
  check_group("adam_step", params, {&grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs});
  BRISK_CHECK(grads.size() == params.size() && exp_avgs.size() == params.size() && exp_avg_sqs.size() == params.size(),
              "adam_step: needs one gradient, exp_avg and exp_avg_sq per parameter (", params.size(), " parameters, ",
              grads.size(), " gradients, ", exp_avgs.size(), " exp_avgs, ", exp_avg_sqs.size(), " exp_avg_sqs)");
  BRISK_CHECK(!h.amsgrad || max_exp_avg_sqs.size() == params.size(), "adam_step: amsgrad needs max_exp_avg_sq state");
  BRISK_CHECK(h.step >= 1, "adam_step: step must be >= 1, got ", h.step);
  if (h.device_scalars.defined() && !params.empty()) {
    const Tensor& d = h.device_scalars;
    BRISK_CHECK(params[0].device().is_cuda() && d.device() == params[0].device() && d.dtype() == DType::F64 &&
                    d.is_contiguous() && h.lr_slot >= 1 && h.lr_slot < d.numel(),
                "adam_step: device_scalars must be a contiguous f64 tensor on the parameters' GPU (",
                params[0].device().str(), ") with the learning rate at an index from 1 to numel - 1; got ", d.sizes(),
                " ", dtype_name(d.dtype()), " on ", d.device().str(), ", lr_slot ", h.lr_slot);
  }
  check_copies("adam_step", params, low_precision_copies);
  if (params.empty()) return;
  if (params[0].device().is_cuda())
    cuda::adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, h, low_precision_copies);
  else
    cpu::adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, h, low_precision_copies);
  bump_versions(params);
  bump_versions(low_precision_copies);
  bump_versions(exp_avgs);
  bump_versions(exp_avg_sqs);
  if (h.amsgrad) bump_versions(max_exp_avg_sqs);
}

void count_step_(const Tensor& counter) {
  BRISK_CHECK(counter.defined() && counter.dtype() == DType::F64 && counter.is_contiguous() && counter.numel() >= 1,
              "count_step_: expected a contiguous f64 tensor of at least one element, got ",
              counter.defined() ? counter.sizes() : Shape{}, counter.defined() ? dtype_name(counter.dtype()) : "");
  if (counter.device().is_cuda())
    cuda::count_step(counter);
  else
    counter.data<double>()[0] += 1.0;
  bump_versions({counter});
}

double sum_of_squares(const std::vector<Tensor>& tensors) {
  const Device dev = check_list("sum_of_squares", tensors);
  if (dev.is_cpu()) return cpu::sum_of_squares(tensors);
  Tensor out = empty({}, DType::F64, dev);
  cuda::reduce_norm(tensors, cuda::NormReduction::SumOfSquares, out);
  return out.item<double>();  // the one host synchronisation
}

double max_abs(const std::vector<Tensor>& tensors) {
  const Device dev = check_list("max_abs", tensors);
  if (dev.is_cpu()) return cpu::max_abs(tensors);
  Tensor out = empty({}, DType::F64, dev);
  cuda::reduce_norm(tensors, cuda::NormReduction::MaxAbs, out);
  return out.item<double>();  // the one host synchronisation
}

Tensor total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  BRISK_CHECK(norm_type == 2.0 || (std::isinf(norm_type) && norm_type > 0),
              "total_norm: norm_type must be 2 or inf, got ", norm_type);
  const Device dev = check_list("total_norm", tensors);
  const bool inf = std::isinf(norm_type);
  Tensor out = empty({}, DType::F64, dev);
  if (dev.is_cuda()) {
    cuda::reduce_norm(tensors, inf ? cuda::NormReduction::MaxAbs : cuda::NormReduction::Norm2, out);
  } else {
    *out.data<double>() = inf ? cpu::max_abs(tensors) : std::sqrt(cpu::sum_of_squares(tensors));
  }
  return out;
}

void clip_grads_with_norm_(const std::vector<Tensor>& tensors, double max_norm, const Tensor& norm) {
  BRISK_CHECK(max_norm >= 0, "clip_grads_with_norm_: max_norm must be non-negative, got ", max_norm);
  const Device dev = check_list("clip_grads_with_norm_", tensors);
  if (tensors.empty()) return;
  BRISK_CHECK(norm.defined() && norm.numel() == 1 && norm.is_floating_point(),
              "clip_grads_with_norm_: norm must be a one-element floating tensor, got ",
              norm.defined() ? norm.sizes() : Shape{}, norm.defined() ? dtype_name(norm.dtype()) : "undefined");
  BRISK_CHECK(norm.device() == dev, "clip_grads_with_norm_: norm is on ", norm.device().str(), " but the tensors on ",
              dev.str());
  if (dev.is_cuda()) {
    cuda::clip_grads_with_norm(tensors, max_norm, norm.dtype() == DType::F64 ? norm : cast(norm, DType::F64));
  } else {
    cpu::clip_grads_with_norm(tensors, max_norm, norm.item<double>());
  }
  bump_versions(tensors);
}

bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale) {
  const Device dev = check_list("unscale_and_check_", grads);
  bool found = false;
  if (dev.is_cpu()) {
    found = cpu::unscale_and_check(grads, inv_scale);
  } else {
    Tensor flag = empty({}, DType::I32, dev);
    cuda::unscale_and_check(grads, inv_scale, flag);
    found = flag.item<int32_t>() != 0;  // the one host synchronisation
  }
  bump_versions(grads);
  return found;
}

}  // namespace brisk::kernels
