// CUDA cases of the reduction family (kernels/reduce.h): every reduction over all dims, several
// dims, negative dims and with keepdim; rows of 1, 31, 33 and 1000 elements (50304 for softmax
// and logsumexp); column reductions and few-output reductions that split; strided inputs (every
// case also runs strided); NaN rows and ties for max/min/argmax/topk; integer and bool inputs
// where the CPU accepts them; the backward kernels.
#include <cmath>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

namespace K = brisk::kernels;
using V = std::vector<Tensor>;

// Values with many ties (multiples of 0.5 in [-2, 2]) and NaNs: none in row 0, every element of
// row 1, every 7th element from row 2 on. Same values on every device; strided like input().
Tensor nan_ties(const CaseEnv& e, const Shape& s, uint64_t seed) {
  CaseEnv host = e;
  host.device = kCPU;
  host.strided = false;
  std::vector<double> v = host.input_as(s, DType::F64, seed, -2, 2).to_vector<double>();
  const int64_t row = s.empty() ? 1 : s.back();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 2) / 2;
    const int64_t r = static_cast<int64_t>(i) / row;
    if (r == 1 || (r >= 2 && i % 7 == 3)) v[i] = std::nan("");
  }
  Tensor t = e.on_device(K::cast(from_vector<double>(v, s), e.dtype));
  if (!e.strided || s.empty()) return t;
  Shape wide = s;
  wide.back() *= 2;
  Tensor buf = e.on_device(K::cast(zeros(wide), e.dtype));
  Strides st = contiguous_strides(wide);
  st.back() = 2;
  Tensor view = buf.as_strided(s, st, buf.offset());
  K::copy_(view, t);
  return view;
}

// softmax's output for the backward cases, made on the CPU so that the backward kernel alone is
// compared.
Tensor softmax_output(const CaseEnv& e, const Shape& s, uint64_t seed, int64_t dim, bool log) {
  CaseEnv host = e;
  host.device = kCPU;
  const Tensor x = host.input(s, seed, -4, 4);
  return e.on_device(log ? K::log_softmax(x, dim) : K::softmax(x, dim));
}

const CaseRegistrar reduce_cases{
    // --- sum, mean, prod ---------------------------------------------------------------------
    {.op = "sum",
     .variant = "all, several, negative dims and keepdim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 1);
           return V{K::sum(x, {}), K::sum(x, {0, 2}), K::sum(x, {-1}, true), K::sum(x, {-3, -2}), K::sum(x, {1}, true)};
         },
     .tolerance_scale = 4},
    {.op = "sum",
     .variant = "rows of 1, 31, 33, 1000; columns; a split reduction; an empty dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return V{K::sum(e.input({7, 1}, 2), {1}),        K::sum(e.input({7, 31}, 3), {1}),
                    K::sum(e.input({5, 33}, 4), {-1}),      K::sum(e.input({3, 1000}, 5), {1}),
                    K::sum(e.input({1000, 64}, 6), {0}),    K::sum(e.input({700, 3}, 7), {0}),
                    K::sum(e.input({2, 100000}, 8), {1}),   K::sum(e.input({3, 0}, 9), {1}),
                    K::sum(e.input({9, 40, 7}, 10), {0, 2})};
         },
     .tolerance_scale = 4},
    {.op = "sum",
     .variant = "integers and bool give i64",
     .run =
         [](const CaseEnv& e) {
           return V{K::sum(e.input_as({6, 33}, DType::I32, 11, -100, 100), {1}),
                    K::sum(e.input_as({6, 33}, DType::I64, 12, -100, 100), {}),
                    K::sum(e.input_as({40, 9}, DType::U8, 13, 0, 200), {0}),
                    K::sum(e.input_as({5, 1000}, DType::Bool, 14, 0, 1), {1})};
         },
     .exact = true},
    {.op = "mean",
     .variant = "dims, keepdim, long rows and columns",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 15);
           return V{K::mean(x, {}),
                    K::mean(x, {1}),
                    K::mean(x, {-1, 0}, true),
                    K::mean(e.input({3, 1000}, 16), {1}),
                    K::mean(e.input({513, 40}, 17), {0}),
                    K::mean(e.input({1, 31}, 18), {1})};
         },
     .tolerance_scale = 4},
    {.op = "prod",
     .variant = "dims, keepdim, and i32 to i64",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 19, 0.7, 1.3);
           return V{K::prod(x, {}), K::prod(x, {2}), K::prod(x, {0, 1}, true),
                    K::prod(e.input({3, 33}, 20, 0.9, 1.1), {1}),
                    K::prod(e.input_as({4, 6}, DType::I32, 21, -3, 4), {1})};
         },
     .tolerance_scale = 4},
    // --- amax, amin, max, min, argmax, argmin -------------------------------------------------
    {.op = "amax",
     .variant = "dims, keepdim, NaN rows and ties, integers",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 22);
           return V{K::amax(x, {}),
                    K::amax(x, {0, 2}),
                    K::amax(x, {-1}, true),
                    K::amax(nan_ties(e, {6, 33}, 23), {1}),
                    K::amax(nan_ties(e, {6, 1000}, 24), {-1}),
                    K::amax(nan_ties(e, {5, 31}, 25), {0}),
                    K::amax(e.input_as({7, 9}, DType::I32, 26, -50, 50), {1})};
         },
     .exact = true},
    {.op = "amin",
     .variant = "dims, keepdim, NaN rows and ties, integers",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 27);
           return V{K::amin(x, {}),
                    K::amin(x, {1}),
                    K::amin(x, {0, -1}, true),
                    K::amin(nan_ties(e, {6, 33}, 28), {1}),
                    K::amin(nan_ties(e, {6, 1000}, 29), {}),
                    K::amin(e.input_as({7, 9}, DType::U8, 30, 0, 250), {0})};
         },
     .exact = true},
    {.op = "max",
     .variant = "along a dim: values and first index, NaN and ties, rows of 1 to 1000",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           V out;
           for (auto [v, i] :
                {K::max(e.input({4, 5, 6}, 31), 1), K::max(e.input({4, 5, 6}, 32), -1, true),
                 K::max(nan_ties(e, {6, 1}, 33), 1), K::max(nan_ties(e, {6, 31}, 34), 1),
                 K::max(nan_ties(e, {6, 33}, 35), -1), K::max(nan_ties(e, {6, 1000}, 36), 1),
                 K::max(nan_ties(e, {40, 6}, 37), 0), K::max(e.input_as({5, 8}, DType::I64, 38, -9, 9), 1)}) {
             out.push_back(v);
             out.push_back(i);
           }
           return out;
         },
     .exact = true},
    {.op = "min",
     .variant = "along a dim: values and first index, NaN and ties",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           V out;
           for (auto [v, i] : {K::min(e.input({4, 5, 6}, 39), 0), K::min(e.input({4, 5, 6}, 40), 2, true),
                               K::min(nan_ties(e, {6, 33}, 41), 1), K::min(nan_ties(e, {6, 1000}, 42), -1),
                               K::min(e.input_as({5, 8}, DType::I32, 43, -9, 9), 0)}) {
             out.push_back(v);
             out.push_back(i);
           }
           return out;
         },
     .exact = true},
    {.op = "argmax",
     .variant = "flattened, along a dim, keepdim, NaN and ties",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 44);
           return V{K::argmax(x),
                    K::argmax(x, 1),
                    K::argmax(x, -1, true),
                    K::argmax(nan_ties(e, {6, 33}, 45), 1),
                    K::argmax(nan_ties(e, {6, 1000}, 46)),
                    K::argmax(nan_ties(e, {6, 31}, 47), 0),
                    K::argmax(e.input_as({9, 4}, DType::U8, 48, 0, 5), 0)};
         },
     .exact = true},
    {.op = "argmin",
     .variant = "flattened, along a dim, keepdim, NaN and ties",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 49);
           return V{K::argmin(x),
                    K::argmin(x, 0),
                    K::argmin(x, -2, true),
                    K::argmin(nan_ties(e, {6, 33}, 50), 1),
                    K::argmin(nan_ties(e, {3, 2000}, 51)),
                    K::argmin(e.input_as({9, 4}, DType::I32, 52, -3, 3), 1)};
         },
     .exact = true},
    // --- var, std, logsumexp -------------------------------------------------------------------
    {.op = "var",
     .variant = "corrections 0, 1, 2, dims, keepdim, rows of 1 and 1000",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 53);
           return V{K::var(x, {}),
                    K::var(x, {1}, 0),
                    K::var(x, {0, 2}, 2, true),
                    K::var(e.input({5, 1}, 54), {1}),
                    K::var(e.input({3, 1000}, 55), {-1}),
                    K::var(e.input({600, 40}, 56), {0})};
         },
     .tolerance_scale = 4},
    {.op = "std",
     .variant = "corrections 0 and 1, dims, keepdim, long rows",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 57);
           return V{K::std(x, {}), K::std(x, {2}, 0, true), K::std(x, {-3, -1}), K::std(e.input({2, 50000}, 58), {1})};
         },
     .tolerance_scale = 4},
    {.op = "logsumexp",
     .variant = "dims, keepdim, rows of 1, 31, 33, 1000, 50304",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 59, -10, 10);
           return V{K::logsumexp(x, {}),
                    K::logsumexp(x, {1}),
                    K::logsumexp(x, {0, -1}, true),
                    K::logsumexp(e.input({5, 1}, 60), {1}),
                    K::logsumexp(e.input({5, 31}, 61), {1}),
                    K::logsumexp(e.input({5, 33}, 62), {-1}),
                    K::logsumexp(e.input({3, 1000}, 63, -20, 20), {1}),
                    K::logsumexp(e.input({2, 50304}, 64, -8, 8), {1}),
                    K::logsumexp(e.input({300, 48}, 65), {0})};
         },
     .tolerance_scale = 10},
    // --- cumsum, topk --------------------------------------------------------------------------
    // Long rows are positive: a running sum that wanders through zero would compare 16-bit
    // roundings of values whose f32 summation orders differ by more than the absolute tolerance.
    {.op = "cumsum",
     .variant = "every dim, reverse, rows of 1 to 3000",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 5, 6}, 66);
           return V{K::cumsum(x, 0),
                    K::cumsum(x, 1),
                    K::cumsum(x, -1),
                    K::cumsum(x, 1, true),
                    K::cumsum(x, -1, true),
                    K::cumsum(e.input({7, 1}, 67), 1),
                    K::cumsum(e.input({7, 31}, 68), 1),
                    K::cumsum(e.input({7, 33}, 69), 1, true),
                    K::cumsum(e.input({3, 1000}, 70, 0, 1), 1),
                    K::cumsum(e.input({2, 3000}, 71, 0, 1), -1, true)};
         },
     .tolerance_scale = 8},
    {.op = "cumsum",
     .variant = "integers and bool give i64",
     .run =
         [](const CaseEnv& e) {
           return V{K::cumsum(e.input_as({5, 300}, DType::I32, 72, -100, 100), 1),
                    K::cumsum(e.input_as({5, 300}, DType::Bool, 73, 0, 1), 1, true),
                    K::cumsum(e.input_as({30, 4}, DType::U8, 74, 0, 200), 0)};
         },
     .exact = true},
    {.op = "topk",
     .variant = "largest/smallest, sorted or not, NaN and ties, rows past a shared-memory tile",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           V out;
           Tensor a = e.input({5, 33}, 75), t = nan_ties(e, {6, 33}, 76), l = e.input({3, 1000}, 77);
           Tensor g = nan_ties(e, {3, 5000}, 78);
           for (auto [v, i] :
                {K::topk(a, 1), K::topk(a, 5, -1, false), K::topk(a, 33, 1, true, false), K::topk(t, 7),
                 K::topk(t, 7, 1, false, false), K::topk(t, 33, -1, false), K::topk(l, 10),
                 K::topk(l, 999, 1, true, false), K::topk(e.input({1, 1}, 79), 1),
                 K::topk(e.input({40, 3, 5}, 80), 4, 0), K::topk(g, 50), K::topk(g, 3000, 1, false, false),
                 K::topk(g, 4100, 1, true, true), K::topk(e.input_as({4, 20}, DType::I32, 81, -5, 5), 6)}) {
             out.push_back(v);
             out.push_back(i);
           }
           return out;
         },
     .exact = true},
    // --- softmax, log_softmax and their backward ------------------------------------------------
    {.op = "softmax",
     .variant = "rows of 1, 31, 33, 1000, 50304; a middle and a first dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return V{K::softmax(e.input({7, 1}, 82), 1),
                    K::softmax(e.input({7, 31}, 83, -8, 8), 1),
                    K::softmax(e.input({7, 33}, 84, -8, 8), -1),
                    K::softmax(e.input({5, 1000}, 85, -8, 8), 1),
                    K::softmax(e.input({2, 50304}, 86, -8, 8), 1),
                    K::softmax(e.input({4, 9, 6}, 87, -8, 8), 1),
                    K::softmax(e.input({40, 6}, 88, -8, 8), 0)};
         },
     .tolerance_scale = 10},
    {.op = "log_softmax",
     .variant = "rows of 1, 31, 33, 1000, 50304; a middle and a first dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return V{K::log_softmax(e.input({7, 1}, 89), 1),
                    K::log_softmax(e.input({7, 31}, 90, -8, 8), 1),
                    K::log_softmax(e.input({7, 33}, 91, -8, 8), -1),
                    K::log_softmax(e.input({5, 1000}, 92, -8, 8), 1),
                    K::log_softmax(e.input({2, 50304}, 93, -8, 8), 1),
                    K::log_softmax(e.input({4, 9, 6}, 94, -8, 8), 1),
                    K::log_softmax(e.input({40, 6}, 95, -8, 8), 0)};
         },
     .tolerance_scale = 10},
    {.op = "softmax_backward",
     .variant = "rows of 1, 33, 1000, 50304 and a middle dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           V out;
           for (const auto& [s, dim] : std::vector<std::pair<Shape, int64_t>>{
                    {{7, 1}, 1}, {{7, 33}, 1}, {{5, 1000}, -1}, {{2, 50304}, 1}, {{4, 9, 6}, 1}}) {
             const Tensor y = softmax_output(e, s, 96 + static_cast<uint64_t>(s.back()), dim, false);
             out.push_back(K::softmax_backward(e.input(s, 97), y, dim));
           }
           return out;
         },
     .tolerance_scale = 10},
    {.op = "log_softmax_backward",
     .variant = "rows of 1, 33, 1000, 50304 and a middle dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           V out;
           for (const auto& [s, dim] : std::vector<std::pair<Shape, int64_t>>{
                    {{7, 1}, 1}, {{7, 33}, 1}, {{5, 1000}, -1}, {{2, 50304}, 1}, {{4, 9, 6}, 1}}) {
             const Tensor y = softmax_output(e, s, 98 + static_cast<uint64_t>(s.back()), dim, true);
             out.push_back(K::log_softmax_backward(e.input(s, 99), y, dim));
           }
           return out;
         },
     .tolerance_scale = 10},
    {.op = "take_along_dim_backward",
     .variant = "max-like (one index), topk-like and repeated indices, along the last and a middle dim",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return V{
               K::take_along_dim_backward(e.input({4, 1, 5}, 100), e.input_as({4, 1, 5}, DType::I64, 101, 0, 7), 1,
                                          {4, 7, 5}),
               K::take_along_dim_backward(e.input({6, 9}, 102), e.input_as({6, 9}, DType::I64, 103, 0, 4), -1, {6, 4}),
               K::take_along_dim_backward(e.input({3, 40}, 104), e.input_as({3, 40}, DType::I64, 105, 0, 1000), 1,
                                          {3, 1000})};
         },
     .exact = true},
};

}  // namespace
}  // namespace brisk::testing
