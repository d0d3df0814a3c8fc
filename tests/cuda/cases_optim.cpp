// CUDA cases of the optimizer family: sgd_step and adam_step over lists of tensors of odd sizes
// (empty, one element, a scalar, tails that are not a multiple of the vector width, a tensor
// longer than one 65536-element chunk), with every option (momentum, Nesterov, dampening,
// weight decay, maximize, AdamW, amsgrad) and 16-bit parameters; the norms and clipping; and the
// GradScaler's unscale with clean, infinite and NaN gradients.
#include <brisk/kernels/optim.h>

#include <cmath>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

const std::vector<DType> kAllFloat = {DType::F64, DType::F32, DType::F16, DType::BF16};

// The shapes every list-op case uses: empty, one element, a scalar, short and long tails, more
// than one chunk.
const std::vector<Shape> kShapes = {{0}, {1}, {}, {5, 3}, {1000}, {65536 + 3}, {129, 7}};

// A contiguous input (the ops need contiguous tensors; strided envs give views to copy first).
Tensor dense(const CaseEnv& e, const Shape& s, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  return kernels::contiguous(e.input(s, seed, lo, hi));
}

std::vector<Tensor> list(const CaseEnv& e, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < kShapes.size(); ++i) out.push_back(dense(e, kShapes[i], seed * 100 + i, lo, hi));
  return out;
}

// A host number as a one-element f64 tensor on the env's device (outputs must be device tensors).
Tensor scalar_out(const CaseEnv& e, double v) {
  return full({1}, v, {.dtype = DType::F64, .device = e.device});
}

std::vector<Tensor> concat(std::vector<Tensor> a, const std::vector<Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Tensor> run_sgd(const CaseEnv& e, const kernels::SgdHyper& h) {
  std::vector<Tensor> p = list(e, 1), g = list(e, 2), buf;
  if (h.momentum != 0) buf = list(e, 3);
  kernels::sgd_step(p, g, buf, h);
  return concat(p, buf);
}

std::vector<Tensor> run_adam(const CaseEnv& e, const kernels::AdamHyper& h) {
  // Second moments are non-negative; amsgrad's running max starts above some of them.
  std::vector<Tensor> p = list(e, 4), g = list(e, 5), m = list(e, 6, -0.5, 0.5), v = list(e, 7, 0.0, 0.3), vmax;
  if (h.amsgrad) vmax = list(e, 8, 0.0, 0.3);
  kernels::adam_step(p, g, m, v, vmax, h);
  return concat(concat(concat(p, m), v), vmax);
}

// Gradients with one bad element in the middle of the long tensor.
std::vector<Tensor> bad_grads(const CaseEnv& e, double bad) {
  std::vector<Tensor> g = list(e, 9);
  kernels::fill_(g[5].narrow(0, 40000, 1), bad);
  return g;
}

const CaseRegistrar optim_cases{
    {.op = "sgd_step",
     .variant = "plain with weight decay",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_sgd(e, {0.1, 0.0, 0.0, 0.01, false, false, false});
         }},
    {.op = "sgd_step",
     .variant = "momentum and dampening, first step",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_sgd(e, {0.05, 0.9, 0.1, 0.0, false, false, true});
         }},
    {.op = "sgd_step",
     .variant = "nesterov momentum and weight decay, later step",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_sgd(e, {0.05, 0.9, 0.0, 0.01, true, false, false});
         }},
    {.op = "sgd_step",
     .variant = "maximize with momentum",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_sgd(e, {0.1, 0.5, 0.0, 0.1, false, true, false});
         }},
    {.op = "adam_step",
     .variant = "adam with L2 weight decay, step 1",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_adam(e, {0.01, 0.9, 0.999, 1e-8, 0.1, false, false, false, 1});
         }},
    {.op = "adam_step",
     .variant = "adamw, step 7",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_adam(e, {0.01, 0.8, 0.99, 1e-8, 0.1, true, false, false, 7});
         }},
    {.op = "adam_step",
     .variant = "adamw amsgrad maximize, step 3",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_adam(e, {0.003, 0.9, 0.999, 1e-6, 0.05, true, true, true, 3});
         }},
    {.op = "adam_step",
     .variant = "adam amsgrad without weight decay, step 2",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           return run_adam(e, {0.01, 0.9, 0.999, 1e-8, 0.0, false, true, false, 2});
         }},
    {.op = "adam_step",
     .variant = "capturable adamw: step 5 and lr read from GPU memory",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           // The host values are wrong on purpose on the GPU: the kernels must read the tensor's.
           kernels::AdamHyper h{0.5, 0.9, 0.999, 1e-8, 0.1, true, false, false, 1};
           if (e.device.is_cuda()) {
             h.device_scalars = e.on_device(from_vector<double>({5.0, 0.5, 0.01}, {3}));
             h.lr_slot = 2;
           } else {
             h.lr = 0.01, h.step = 5;
           }
           return run_adam(e, h);
         }},
    {.op = "count_step_",
     .variant = "counted twice where the counter lives",
     .run =
         [](const CaseEnv& e) {
           Tensor c = e.on_device(from_vector<double>({41.0, 7.0}, {2}));
           kernels::count_step_(c);
           kernels::count_step_(c);
           return std::vector<Tensor>{c};
         },
     .exact = true},
    {.op = "sum_of_squares",
     .variant = "odd sizes, mixed with f32",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> ts = list(e, 10);
           ts.push_back(kernels::contiguous(e.input_as({77}, DType::F32, 11, -3, 3)));
           return std::vector<Tensor>{scalar_out(e, kernels::sum_of_squares(ts)),
                                      scalar_out(e, kernels::sum_of_squares({}))};
         }},
    {.op = "max_abs",
     .variant = "odd sizes, mixed with f32, and NaN winning",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> ts = list(e, 12);
           ts.push_back(kernels::contiguous(e.input_as({77}, DType::F32, 13, -3, 3)));
           const double clean = kernels::max_abs(ts);
           std::vector<Tensor> nan = bad_grads(e, NAN);
           return std::vector<Tensor>{scalar_out(e, clean), scalar_out(e, kernels::max_abs(nan)),
                                      scalar_out(e, kernels::max_abs({}))};
         }},
    {.op = "total_norm",
     .variant = "norm 2 and infinity, on the device",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> ts = list(e, 14);
           return std::vector<Tensor>{kernels::total_norm(ts, 2.0), kernels::total_norm(ts, INFINITY)};
         }},
    {.op = "clip_grads_with_norm_",
     .variant = "clipping and not clipping, norm read on the device",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> a = list(e, 15), b = list(e, 16);
           kernels::clip_grads_with_norm_(a, 1.0, kernels::total_norm(a, 2.0));       // norm ~ 300: scaled
           kernels::clip_grads_with_norm_(b, 1e6, kernels::total_norm(b, INFINITY));  // untouched
           return concat(a, b);
         }},
    {.op = "unscale_and_check_",
     .variant = "clean, infinite and NaN gradients",
     .dtypes = kAllFloat,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> clean = list(e, 17, -1000, 1000);
           const bool f0 = kernels::unscale_and_check_(clean, 1.0 / 1024);
           std::vector<Tensor> inf = bad_grads(e, INFINITY), nan = bad_grads(e, NAN);
           const bool f1 = kernels::unscale_and_check_(inf, 0.5);
           const bool f2 = kernels::unscale_and_check_(nan, 0.5);
           std::vector<Tensor> out = concat(clean, inf);
           for (double f : {f0 ? 1.0 : 0.0, f1 ? 1.0 : 0.0, f2 ? 1.0 : 0.0}) out.push_back(scalar_out(e, f));
           return out;
         }},
};

}  // namespace
}  // namespace brisk::testing
