// CUDA cases of the nn family: embedding (repeated indices, padding_idx, the atomic backward),
// layer norm and batch norm (odd sizes, rows longer than a block, several chunks per channel),
// dropout (the CPU's mask from the same seed), and cross entropy / NLL with ignore_index, label
// smoothing, every reduction, (N, C) and (N, C, d1, d2) inputs and C = 1, 10, 50304.
#include <brisk/kernels/nn.h>
#include <brisk/kernels/settings.h>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

using kernels::Reduction;

// A CPU tensor on the env's device in the env's layout (a stride-2 view along the last dim
// when strided).
Tensor layout_like(const CaseEnv& e, const Tensor& cpu) {
  if (!e.strided || cpu.dim() == 0 || cpu.numel() <= 1) return e.on_device(cpu);
  Shape wide = cpu.sizes();
  wide.back() *= 2;
  Tensor big = zeros(wide, {cpu.dtype(), kCPU});
  Strides st = contiguous_strides(wide);
  st.back() = 2;
  kernels::copy_(big.as_strided(cpu.sizes(), st, 0), cpu);
  Tensor dev = e.on_device(big);
  return dev.as_strided(cpu.sizes(), st, dev.offset());
}

// Class targets in [0, C) of `sizes`, every third one from the second replaced by `ignore`.
Tensor targets(const CaseEnv& e, const Shape& sizes, int64_t C, int64_t ignore, uint64_t seed, DType dt = DType::I64) {
  CaseEnv host{kCPU, DType::I64, false};
  Tensor t = host.input_as(sizes, DType::I64, seed, 0, static_cast<double>(C));
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 1; i < t.numel(); i += 3) p[i] = ignore;
  return layout_like(e, kernels::cast(t, dt));
}

std::vector<Tensor> loss_outputs(const kernels::ClassLossResult& r) {
  return {r.loss, r.lse, r.count};
}

const CaseRegistrar nn_cases{
    {.op = "embedding",
     .variant = "repeated i64 and i32 indices, vector and odd rows",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a = kernels::embedding(e.input_as({3, 5}, DType::I64, 1, 0, 11), e.input({11, 24}, 2));
           Tensor b = kernels::embedding(e.input_as({9}, DType::I32, 3, 0, 4), e.input({4, 7}, 4));
           Tensor c = kernels::embedding(e.input_as({}, DType::I64, 5, 0, 4), e.input({4, 7}, 6));
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
    {.op = "embedding_backward",
     .variant = "repeated indices summed in index order, padding_idx",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a =
               kernels::embedding_backward(e.input({4, 6, 16}, 7), e.input_as({4, 6}, DType::I64, 8, 0, 5), 5, 2);
           Tensor b =
               kernels::embedding_backward(e.input({300, 3}, 9), e.input_as({300}, DType::I32, 10, 0, 50), 50, -1);
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "embedding_backward",
     .variant = "atomicAdd (deterministic off)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           kernels::DeterministicGuard off(false);
           // Small integers: their sums are exact in any order, so the result compares exactly.
           Tensor grad = kernels::cast(e.input_as({300, 5}, DType::I32, 11, -4, 4), e.dtype);
           return std::vector<Tensor>{
               kernels::embedding_backward(grad, e.input_as({300}, DType::I64, 12, 0, 20), 20, 3)};
         },
     .exact = true},
    {.op = "layer_norm",
     .variant = "odd rows, two normalised dims, long rows, no affine, rows of 20000",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (const auto& r :
                {kernels::layer_norm(e.input({6, 37}, 13), {37}, e.input({37}, 14), e.input({37}, 15), 1e-5),
                 kernels::layer_norm(e.input({3, 4, 256}, 16, -3, 5), {4, 256}, e.input({4, 256}, 17),
                                     e.input({4, 256}, 18), 1e-5),
                 kernels::layer_norm(e.input({2, 5000}, 19), {5000}, Tensor(), Tensor(), 1e-3),
                 // Rows too long for registers: held in shared memory (f32, f64) or registers (16-bit).
                 kernels::layer_norm(e.input({3, 20000}, 120, -2, 6), {20000}, e.input({20000}, 121),
                                     e.input({20000}, 122), 1e-5)}) {
             out.insert(out.end(), {r.y, r.mean, r.rstd});
           }
           return out;
         },
     .tolerance_scale = 10},
    {.op = "layer_norm_backward",
     .variant = "dx, dweight, dbias over several row chunks; no weight",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({70, 48}, 20), w = e.input({48}, 21);
           kernels::LayerNormResult f = kernels::layer_norm(x, {48}, w, e.input({48}, 22), 1e-5);
           kernels::LayerNormGrads a =
               kernels::layer_norm_backward(e.input({70, 48}, 23), x, f.mean, f.rstd, w, {true, true, true});
           Tensor x2 = e.input({5, 3, 7}, 24);
           kernels::LayerNormResult f2 = kernels::layer_norm(x2, {7}, Tensor(), Tensor(), 1e-5);
           kernels::LayerNormGrads b = kernels::layer_norm_backward(e.input({5, 3, 7}, 25), x2, f2.mean, f2.rstd,
                                                                    Tensor(), {true, false, true});
           return std::vector<Tensor>{a.dx, a.dweight, a.dbias, b.dx, b.dbias};
         },
     .tolerance_scale = 10},
    {.op = "add_layer_norm",
     .variant = "odd rows, rows of 768, two normalised dims without affine, rows of 20000",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (const auto& r : {kernels::add_layer_norm(e.input({6, 37}, 130), e.input({6, 37}, 131), {37},
                                                         e.input({37}, 132), e.input({37}, 133), 1e-5),
                                 kernels::add_layer_norm(e.input({5, 768}, 134, -3, 5), e.input({5, 768}, 135), {768},
                                                         e.input({768}, 136), e.input({768}, 137), 1e-5),
                                 kernels::add_layer_norm(e.input({3, 4, 256}, 138), e.input({3, 4, 256}, 139), {4, 256},
                                                         Tensor(), Tensor(), 1e-3),
                                 kernels::add_layer_norm(e.input({3, 20000}, 140, -2, 6), e.input({3, 20000}, 141),
                                                         {20000}, e.input({20000}, 142), e.input({20000}, 143), 1e-5)})
             out.insert(out.end(), {r.h, r.y, r.mean, r.rstd});
           return out;
         },
     .tolerance_scale = 10},
    {.op = "add_layer_norm_backward",
     .variant = "with the sum's gradient over several row chunks; without it and without weight",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({70, 48}, 144), w = e.input({48}, 146);
           kernels::AddLayerNormResult f =
               kernels::add_layer_norm(x, e.input({70, 48}, 145), {48}, w, e.input({48}, 147), 1e-5);
           kernels::LayerNormGrads a = kernels::add_layer_norm_backward(e.input({70, 48}, 148), e.input({70, 48}, 149),
                                                                        f.h, f.mean, f.rstd, w, {true, true, true});
           kernels::AddLayerNormResult f2 =
               kernels::add_layer_norm(e.input({5, 3, 7}, 150), e.input({5, 3, 7}, 151), {7}, Tensor(), Tensor(), 1e-5);
           kernels::LayerNormGrads b = kernels::add_layer_norm_backward(
               e.input({5, 3, 7}, 152), Tensor(), f2.h, f2.mean, f2.rstd, Tensor(), {true, false, true});
           return std::vector<Tensor>{a.dx, a.dweight, a.dbias, b.dx, b.dbias};
         },
     .tolerance_scale = 10},
    {.op = "batch_norm",
     .variant = "training with running stats (several chunks per channel), eval, 1-d, no affine",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor rm = e.input({3}, 26), rv = e.input({3}, 27, 0.5, 2.0);
           kernels::BatchNormResult a = kernels::batch_norm(e.input({8, 3, 5, 5}, 28), e.input({3}, 29),
                                                            e.input({3}, 30), rm, rv, true, 0.1, 1e-5);
           out.insert(out.end(), {a.y, a.save_mean, a.save_invstd, rm, rv});
           Tensor rm2 = e.input({2}, 31), rv2 = e.input({2}, 32, 0.5, 2.0);
           kernels::BatchNormResult b =
               kernels::batch_norm(e.input({4, 2, 64, 65}, 33), Tensor(), Tensor(), rm2, rv2, true, 0.3, 1e-5);
           out.insert(out.end(), {b.y, b.save_mean, b.save_invstd, rm2, rv2});
           kernels::BatchNormResult c =
               kernels::batch_norm(e.input({16, 6}, 34), e.input({6}, 35), Tensor(), e.input({6}, 36),
                                   e.input({6}, 37, 0.5, 2.0), false, 0.1, 1e-5);
           out.insert(out.end(), {c.y, c.save_mean, c.save_invstd});
           kernels::BatchNormResult d =
               kernels::batch_norm(e.input({7, 5, 3}, 38), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
           out.insert(out.end(), {d.y, d.save_mean, d.save_invstd});
           return out;
         },
     .tolerance_scale = 10},
    {.op = "batch_norm_backward",
     .variant = "training and eval, with and without weight",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({6, 4, 9, 7}, 39), w = e.input({4}, 40);
           kernels::BatchNormResult f =
               kernels::batch_norm(x, w, e.input({4}, 41), Tensor(), Tensor(), true, 0.1, 1e-5);
           kernels::BatchNormGrads a = kernels::batch_norm_backward(e.input({6, 4, 9, 7}, 42), x, w, f.save_mean,
                                                                    f.save_invstd, true, {true, true, true});
           Tensor x2 = e.input({33, 5}, 43);
           kernels::BatchNormResult f2 = kernels::batch_norm(x2, Tensor(), Tensor(), e.input({5}, 44),
                                                             e.input({5}, 45, 0.5, 2.0), false, 0.1, 1e-5);
           kernels::BatchNormGrads b = kernels::batch_norm_backward(e.input({33, 5}, 46), x2, Tensor(), f2.save_mean,
                                                                    f2.save_invstd, false, {true, true, true});
           return std::vector<Tensor>{a.dx, a.dweight, a.dbias, b.dx, b.dweight, b.dbias};
         },
     .tolerance_scale = 10},
    {.op = "dropout",
     .variant = "the CPU's mask for a seed, tails, p = 0 and 1",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator gen(47);
           kernels::DropoutResult a = kernels::dropout(e.input({1003}, 48), 0.3, &gen);
           kernels::DropoutResult b = kernels::dropout(e.input({7, 9}, 49), 1.0, &gen);
           kernels::DropoutResult c = kernels::dropout(e.input({5}, 50), 0.0, &gen);
           return std::vector<Tensor>{a.y, a.mask, b.y, b.mask, c.y, c.mask};
         },
     .exact = true},
    {.op = "dropout_backward",
     .variant = "strided grad",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator gen(51);
           kernels::DropoutResult f = kernels::dropout(e.input({37, 5}, 52), 0.25, &gen);
           return std::vector<Tensor>{kernels::dropout_backward(e.input({37, 5}, 53), f.mask, 0.25)};
         },
     .exact = true},
    {.op = "cross_entropy",
     .variant = "(N, C) with ignore_index and label smoothing, every reduction, C = 1",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor z = e.input({12, 10}, 54, -4, 4);
           Tensor t = targets(e, {12}, 10, -1, 55);
           for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
             for (const Tensor& o : loss_outputs(kernels::cross_entropy(z, t, -1, 0.1, red))) out.push_back(o);
           for (const Tensor& o : loss_outputs(
                    kernels::cross_entropy(z, targets(e, {12}, 10, -100, 56, DType::I32), -100, 0.0, Reduction::Mean)))
             out.push_back(o);
           for (const Tensor& o : loss_outputs(kernels::cross_entropy(e.input({6, 1}, 57), targets(e, {6}, 1, -100, 58),
                                                                      -100, 0.2, Reduction::Mean)))
             out.push_back(o);
           for (const Tensor& o : loss_outputs(
                    kernels::cross_entropy(e.input({10}, 59), targets(e, {}, 10, -100, 60), -100, 0.0, Reduction::Sum)))
             out.push_back(o);
           return out;
         },
     .tolerance_scale = 10},
    {.op = "cross_entropy",
     .variant = "(N, C, d1, d2) and C = 50304",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (const Tensor& o : loss_outputs(kernels::cross_entropy(
                    e.input({2, 5, 3, 4}, 61), targets(e, {2, 3, 4}, 5, 7, 62), 7, 0.1, Reduction::Mean)))
             out.push_back(o);
           for (const Tensor& o : loss_outputs(kernels::cross_entropy(
                    e.input({2, 5, 3, 4}, 63), targets(e, {2, 3, 4}, 5, -100, 64), -100, 0.0, Reduction::None)))
             out.push_back(o);
           for (const Tensor& o : loss_outputs(kernels::cross_entropy(
                    e.input({3, 50304}, 65, -8, 8), targets(e, {3}, 50304, -100, 66), -100, 0.1, Reduction::Mean)))
             out.push_back(o);
           return out;
         },
     .tolerance_scale = 10},
    {.op = "cross_entropy_backward",
     .variant = "mean with smoothing, none per position, (N, C, d1, d2), C = 50304",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor z = e.input({12, 10}, 67, -4, 4), t = targets(e, {12}, 10, -1, 68);
           auto fm = kernels::cross_entropy(z, t, -1, 0.1, Reduction::Mean);
           out.push_back(kernels::cross_entropy_backward(e.input({}, 69), z, t, fm, -1, 0.1, Reduction::Mean));
           auto fn = kernels::cross_entropy(z, t, -1, 0.0, Reduction::None);
           out.push_back(kernels::cross_entropy_backward(e.input({12}, 70), z, t, fn, -1, 0.0, Reduction::None));
           Tensor z4 = e.input({2, 5, 3, 4}, 71), t4 = targets(e, {2, 3, 4}, 5, -100, 72, DType::I32);
           auto f4 = kernels::cross_entropy(z4, t4, -100, 0.2, Reduction::Sum);
           out.push_back(kernels::cross_entropy_backward(e.input({}, 73), z4, t4, f4, -100, 0.2, Reduction::Sum));
           Tensor zb = e.input({2, 50304}, 74, -8, 8), tb = targets(e, {2}, 50304, -100, 75);
           auto fb = kernels::cross_entropy(zb, tb, -100, 0.0, Reduction::Mean);
           out.push_back(kernels::cross_entropy_backward(e.input({}, 76), zb, tb, fb, -100, 0.0, Reduction::Mean));
           return out;
         },
     .tolerance_scale = 10},
    {.op = "nll_loss",
     .variant = "(N, C) and (N, C, d) with ignore_index, every reduction",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor lp = e.input({9, 6}, 77, -5, 0), t = targets(e, {9}, 6, -100, 78);
           for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
             for (const Tensor& o : loss_outputs(kernels::nll_loss(lp, t, -100, red))) out.push_back(o);
           for (const Tensor& o : loss_outputs(kernels::nll_loss(
                    e.input({2, 4, 5}, 79, -5, 0), targets(e, {2, 5}, 4, 2, 80, DType::I32), 2, Reduction::Mean)))
             out.push_back(o);
           return out;
         },
     .tolerance_scale = 10},
    {.op = "nll_loss_backward",
     .variant = "mean, sum and none, (N, C, d)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor lp = e.input({9, 6}, 81, -5, 0), t = targets(e, {9}, 6, -100, 82);
           auto fm = kernels::nll_loss(lp, t, -100, Reduction::Mean);
           out.push_back(kernels::nll_loss_backward(e.input({}, 83), lp, t, fm, -100, Reduction::Mean));
           auto fn = kernels::nll_loss(lp, t, -100, Reduction::None);
           out.push_back(kernels::nll_loss_backward(e.input({9}, 84), lp, t, fn, -100, Reduction::None));
           Tensor lp3 = e.input({2, 4, 5}, 85, -5, 0), t3 = targets(e, {2, 5}, 4, -100, 86, DType::I32);
           auto fs = kernels::nll_loss(lp3, t3, -100, Reduction::Sum);
           out.push_back(kernels::nll_loss_backward(e.input({}, 87), lp3, t3, fs, -100, Reduction::Sum));
           return out;
         },
     .tolerance_scale = 10},
};

}  // namespace
}  // namespace brisk::testing
