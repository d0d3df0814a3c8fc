// CUDA cases of the elementwise family: every UnaryOp forward and backward, every BinaryOp with
// broadcasting and mixed dtypes, tensor-scalar ops in both orders, comparisons, where, clamp and
// its gradient, add_ and mul_scalar_. Shapes have odd lengths (tails that are not a multiple of
// any vector width), inputs come strided or contiguous (the harness runs both), and special
// values (NaN, infinities, signed zeros) are fed where the semantics care. Results that are
// pure IEEE arithmetic or selection are compared exactly; transcendental functions within the
// dtype's tolerance (CUDA's libm is not glibc's).
#include <cmath>
#include <limits>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

using kernels::BinaryOp;
using kernels::CompareOp;
using kernels::UnaryOp;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const UnaryOp kAllUnary[] = {UnaryOp::Neg,        UnaryOp::Exp,  UnaryOp::Log,      UnaryOp::Sqrt,    UnaryOp::Rsqrt,
                             UnaryOp::Abs,        UnaryOp::Relu, UnaryOp::GeluTanh, UnaryOp::GeluErf, UnaryOp::Silu,
                             UnaryOp::Sigmoid,    UnaryOp::Tanh, UnaryOp::Sin,      UnaryOp::Cos,     UnaryOp::Square,
                             UnaryOp::Reciprocal, UnaryOp::Sign, UnaryOp::Log1p,    UnaryOp::Expm1};
// The ops whose results are IEEE-exact (no libm call): GPU and CPU agree bit for bit.
const UnaryOp kExactUnary[] = {UnaryOp::Neg,  UnaryOp::Abs,   UnaryOp::Relu, UnaryOp::Square,
                               UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Sign, UnaryOp::Reciprocal};
const UnaryOp kIntegerUnary[] = {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Square, UnaryOp::Sign};
const BinaryOp kAllBinary[] = {BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,    BinaryOp::Div,
                               BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum};
const BinaryOp kExactBinary[] = {BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,
                                 BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum};
const CompareOp kAllCompare[] = {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt,
                                 CompareOp::Le, CompareOp::Gt, CompareOp::Ge};

// Inputs in the op's domain (positive where the op needs it), odd sizes.
Tensor unary_input(const CaseEnv& e, UnaryOp op, const Shape& s, uint64_t seed) {
  const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || op == UnaryOp::Reciprocal;
  if (op == UnaryOp::Log1p) return e.input(s, seed, -0.9, 3.0);
  return positive ? e.input(s, seed, 0.2, 3.0) : e.input(s, seed, -3.0, 3.0);
}

// Values the semantics care about, in dtype `dt` on the env's device (a stride-2 view of a wider
// buffer when the env is strided). 37 of them: not a multiple of any vector width.
const std::vector<double> kSpecials = {kNaN, kInf,  -kInf, 0.0,    -0.0,    1.0,   -1.0, 0.5,   -0.5, 2.0,
                                       -2.0, 3.0,   -3.0,  0.25,   1e-3,    -1e-3, 10.0, -10.0, 20.0, -20.0,
                                       87.0, -87.0, 100.0, -100.0, 1e4,     -1e4,  0.75, -0.75, 1.5,  -1.5,
                                       6.0,  -6.0,  1e-6,  -1e-6,  65504.0, 4.0,   -4.0};

Tensor values_on(const CaseEnv& e, const std::vector<double>& v, DType dt) {
  const auto n = static_cast<int64_t>(v.size());
  std::vector<double> wide = v;
  if (e.strided) {
    wide.assign(static_cast<size_t>(2 * n), 0.0);
    for (int64_t i = 0; i < n; ++i) wide[static_cast<size_t>(2 * i)] = v[static_cast<size_t>(i)];
  }
  Tensor host = kernels::cast(from_vector<double>(wide, {static_cast<int64_t>(wide.size())}), dt);
  Tensor dev = e.on_device(host);
  return e.strided ? dev.as_strided({n}, {2}, dev.offset()) : dev;
}

// A contiguous view whose first element is one element past a 16-byte boundary: contiguous but
// not aligned for vector loads, so the loop must take its strided path.
Tensor misaligned(const CaseEnv& e, int64_t n, uint64_t seed) {
  CaseEnv flat = e;
  flat.strided = false;
  Tensor buf = flat.input({n + 1}, seed);
  return buf.as_strided({n}, {1}, buf.offset() + 1);
}

const CaseRegistrar elementwise_cases{
    // --- unary -------------------------------------------------------------------------------
    {.op = "unary",
     .variant = "every op, odd shape (37 x 29)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (UnaryOp op : kAllUnary) out.push_back(kernels::unary(op, unary_input(e, op, {37, 29}, 1)));
           return out;
         }},
    {.op = "unary",
     .variant = "IEEE-exact ops, bit for bit, tail of 4099",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (UnaryOp op : kExactUnary) out.push_back(kernels::unary(op, unary_input(e, op, {4099}, 2)));
           return out;
         },
     .exact = true},
    {.op = "unary",
     .variant = "every op on NaN, infinities, signed zeros and large values",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor x = values_on(e, kSpecials, e.dtype);
           for (UnaryOp op : kAllUnary) out.push_back(kernels::unary(op, x));
           return out;
         }},
    {.op = "unary",
     .variant = "integer inputs (i32, i64, u8; the float-only ops in f32)",
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (DType dt : {DType::I32, DType::I64, DType::U8}) {
             const Tensor x =
                 dt == DType::U8 ? e.input_as({5, 41}, dt, 3, 0, 256) : e.input_as({5, 41}, dt, 3, -60, 60);
             for (UnaryOp op : kIntegerUnary) out.push_back(kernels::unary(op, x));
           }
           const Tensor xi = e.input_as({3, 11}, DType::I32, 4, 1, 9);
           for (UnaryOp op : kAllUnary) out.push_back(kernels::unary(op, xi));
           return out;
         }},
    {.op = "unary",
     .variant = "0-dim, empty, misaligned contiguous and transposed inputs",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor t = e.input({9, 13}, 6);
           return std::vector<Tensor>{
               kernels::unary(UnaryOp::Tanh, e.input({}, 5)), kernels::unary(UnaryOp::Relu, e.input({0, 5}, 5)),
               kernels::unary(UnaryOp::Square, misaligned(e, 1001, 7)),
               kernels::unary(UnaryOp::Sigmoid, t.as_strided({13, 9}, {t.stride(1), t.stride(0)}, t.offset()))};
         }},
    // --- unary_backward ------------------------------------------------------------------------
    {.op = "unary_backward",
     .variant = "every op, y = op(x), odd shape (23 x 31)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor g = e.input({23, 31}, 10);
           for (UnaryOp op : kAllUnary) {
             const Tensor x = unary_input(e, op, {23, 31}, 11);
             out.push_back(kernels::unary_backward(op, g, x, kernels::unary(op, x)));
           }
           return out;
         }},
    {.op = "unary_backward",
     .variant = "every op on NaN, infinities and signed zeros",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor x = values_on(e, kSpecials, e.dtype);
           const Tensor g = e.input({static_cast<int64_t>(kSpecials.size())}, 12);
           for (UnaryOp op : kAllUnary) out.push_back(kernels::unary_backward(op, g, x, kernels::unary(op, x)));
           return out;
         }},
    {.op = "unary_backward",
     .variant = "x of another dtype, y not given, tail of 1027",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor g = e.input({1027}, 13);
           const Tensor x = e.input_as({1027}, DType::F32, 14, -2, 2);
           return std::vector<Tensor>{kernels::unary_backward(UnaryOp::Relu, g, x, Tensor()),
                                      kernels::unary_backward(UnaryOp::GeluErf, g, x, Tensor())};
         }},
    // --- binary --------------------------------------------------------------------------------
    {.op = "binary",
     .variant = "exact ops, broadcast [3,1,7] with [5,1] and same-shape tail of 4099",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor a = e.input({3, 1, 7}, 20), b = e.input({5, 1}, 21, 0.5, 2.0);
           const Tensor c = e.input({4099}, 22), d = e.input({4099}, 23, 0.5, 2.0);
           for (BinaryOp op : kExactBinary) {
             out.push_back(kernels::binary(op, a, b));
             out.push_back(kernels::binary(op, b, a));
             out.push_back(kernels::binary(op, c, d));
           }
           return out;
         },
     .exact = true},
    {.op = "binary",
     .variant = "pow, broadcast and same shape",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor a = e.input({3, 1, 7}, 24, 0.1, 3.0), b = e.input({5, 1}, 25, -3.0, 3.0);
           const Tensor c = e.input({1001}, 26, 0.1, 3.0), d = e.input({1001}, 27, -3.0, 3.0);
           return std::vector<Tensor>{kernels::binary(BinaryOp::Pow, a, b), kernels::binary(BinaryOp::Pow, c, d)};
         }},
    {.op = "binary",
     .variant = "every op on every pair of special values (NaN propagation, signed zeros)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const std::vector<double> s = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -100.0, 7.0};
           const auto n = static_cast<int64_t>(s.size());
           const Tensor col = values_on(e, s, e.dtype), row = values_on(e, s, e.dtype);
           const Tensor x = col.as_strided({n, 1}, {col.stride(0), 1}, col.offset());
           const Tensor y = row.as_strided({1, n}, {1, row.stride(0)}, row.offset());
           std::vector<Tensor> out;
           for (BinaryOp op : kAllBinary) out.push_back(kernels::binary(op, x, y));
           return out;
         }},
    {.op = "binary",
     .variant = "integer and bool dtypes (wrap-around, integer pow, true division)",
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (DType dt : {DType::I32, DType::I64, DType::U8}) {
             const bool u = dt == DType::U8;
             const Tensor a = e.input_as({6, 35}, dt, 30, u ? 0 : -100, u ? 256 : 100);
             const Tensor b = e.input_as({35}, dt, 31, u ? 0 : -100, u ? 256 : 100);
             for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum})
               out.push_back(kernels::binary(op, a, b));
             const Tensor nonzero = e.input_as({35}, dt, 32, 1, 9);
             out.push_back(kernels::binary(BinaryOp::Div, a, nonzero));  // f32
             // Results that fit the type (the CPU's pow goes through double: overflow is undefined).
             const Tensor base = e.input_as({6, 35}, dt, 33, u ? 0 : -5, u ? 4 : 6);
             const Tensor ex = e.input_as({35}, dt, 34, 0, u ? 4 : 6);
             out.push_back(kernels::binary(BinaryOp::Pow, base, ex));
           }
           // Negative exponents: (+-1)^-k is +-1, |x|^-k for |x| >= 2 truncates to 0.
           const Tensor neg_ex = e.input_as({17}, DType::I64, 35, -4, 0);
           const Tensor pm = kernels::binary_scalar(
               BinaryOp::Sub, kernels::binary_scalar(BinaryOp::Mul, e.input_as({17}, DType::I64, 36, 0, 2), 2.0), 1.0);
           const Tensor big = e.input_as({17}, DType::I32, 37, 2, 9);
           out.push_back(kernels::binary(BinaryOp::Pow, pm, neg_ex));
           out.push_back(kernels::binary(BinaryOp::Pow, big, neg_ex));
           const Tensor p = e.input_as({9, 4}, DType::Bool, 38, 0, 1), q = e.input_as({4}, DType::Bool, 39, 0, 1);
           out.push_back(kernels::binary(BinaryOp::Add, p, q));  // u8
           out.push_back(kernels::binary(BinaryOp::Maximum, p, q));
           return out;
         },
     .exact = true},
    {.op = "binary",
     .variant = "mixed dtypes promote (with f32, i32, i64, and f16 with bf16)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor a = e.input({7, 33}, 40);
           const Tensor f32 = e.input_as({33}, DType::F32, 41, -2, 2);
           const Tensor i32 = e.input_as({7, 1}, DType::I32, 42, -9, 9);
           const Tensor i64 = e.input_as({33}, DType::I64, 43, 1, 9);
           const Tensor h = e.input_as({33}, DType::F16, 44, -2, 2), bf = e.input_as({7, 1}, DType::BF16, 45, -2, 2);
           return std::vector<Tensor>{
               kernels::binary(BinaryOp::Add, a, f32),     kernels::binary(BinaryOp::Mul, i32, a),
               kernels::binary(BinaryOp::Div, a, i64),     kernels::binary(BinaryOp::Sub, h, bf),
               kernels::binary(BinaryOp::Maximum, i64, a), kernels::binary(BinaryOp::Div, i32, i64)};
         },
     .exact = true},
    // --- binary_scalar -------------------------------------------------------------------------
    {.op = "binary_scalar",
     .variant = "exact ops, tensor op scalar and scalar op tensor, tail of 1029",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor x = e.input({1029}, 50, 0.25, 3.0);
           for (BinaryOp op : kExactBinary)
             for (double s : {2.5, -0.5, 1.0 / 3.0}) {
               out.push_back(kernels::binary_scalar(op, x, s));
               out.push_back(kernels::binary_scalar(op, x, s, true));
             }
           return out;
         },
     .exact = true},
    {.op = "binary_scalar",
     .variant = "pow both ways, and every op against NaN and infinite scalars",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor x = e.input({8, 37}, 51, 0.25, 3.0);
           for (double s : {2.0, -1.5, 0.5}) {
             out.push_back(kernels::binary_scalar(BinaryOp::Pow, x, s));
             out.push_back(kernels::binary_scalar(BinaryOp::Pow, x, s, true));
           }
           const Tensor sp = values_on(e, kSpecials, e.dtype);
           for (BinaryOp op : kAllBinary)
             for (double s : {kNaN, kInf, -kInf, -0.0}) {
               out.push_back(kernels::binary_scalar(op, sp, s));
               out.push_back(kernels::binary_scalar(op, sp, s, true));
             }
           return out;
         }},
    {.op = "binary_scalar",
     .variant = "integer tensors: integral scalars stay integer, fractional ones give f32",
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (DType dt : {DType::I32, DType::I64, DType::U8}) {
             const Tensor x = e.input_as({3, 43}, dt, 52, 0, 6);  // x^3 and 2^x fit in u8
             for (BinaryOp op : kAllBinary) {
               out.push_back(kernels::binary_scalar(op, x, 3.0));
               out.push_back(kernels::binary_scalar(op, x, 2.0, true));
               out.push_back(kernels::binary_scalar(op, x, 0.5));
             }
           }
           const Tensor b = e.input_as({21}, DType::Bool, 53, 0, 1);
           out.push_back(kernels::binary_scalar(BinaryOp::Add, b, 2.0));
           return out;
         },
     .exact = true},
    // --- compare -------------------------------------------------------------------------------
    {.op = "compare",
     .variant = "every op, broadcast, equal values and NaN",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor a = e.input({6, 1, 9}, 60);
           const Tensor b = e.input({4, 9}, 61);
           const Tensor same = e.input({6, 1, 9}, 60);  // equal to a element for element
           const Tensor sp = values_on(e, kSpecials, e.dtype);
           const Tensor sp_rev = values_on(e, std::vector<double>(kSpecials.rbegin(), kSpecials.rend()), e.dtype);
           for (CompareOp op : kAllCompare) {
             out.push_back(kernels::compare(op, a, b));
             out.push_back(kernels::compare(op, a, same));
             out.push_back(kernels::compare(op, sp, sp_rev));
             out.push_back(kernels::compare(op, sp, sp));
           }
           return out;
         },
     .exact = true},
    {.op = "compare",
     .variant = "mixed and integer dtypes, bool against bool",
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor f = e.input({5, 19}, 62, -5, 5);
           const Tensor i = e.input_as({19}, DType::I32, 63, -5, 5), l = e.input_as({5, 1}, DType::I64, 64, -5, 5);
           const Tensor u = e.input_as({19}, DType::U8, 65, 0, 5);
           const Tensor p = e.input_as({5, 19}, DType::Bool, 66, 0, 1), q = e.input_as({19}, DType::Bool, 67, 0, 1);
           for (CompareOp op : kAllCompare) {
             out.push_back(kernels::compare(op, f, i));
             out.push_back(kernels::compare(op, l, i));
             out.push_back(kernels::compare(op, u, l));
             out.push_back(kernels::compare(op, p, q));
           }
           return out;
         },
     .exact = true},
    {.op = "compare_scalar",
     .variant = "every op, NaN and infinite operands, integer tensors against fractional scalars",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           const Tensor x = e.input({11, 23}, 70);
           const Tensor sp = values_on(e, kSpecials, e.dtype);
           const Tensor xi = e.input_as({3, 23}, DType::I64, 71, -4, 4);
           const Tensor xb = e.input_as({23}, DType::Bool, 72, 0, 1);
           for (CompareOp op : kAllCompare) {
             out.push_back(kernels::compare_scalar(op, x, 0.25));
             out.push_back(kernels::compare_scalar(op, sp, 1.0));
             out.push_back(kernels::compare_scalar(op, sp, kInf));
             out.push_back(kernels::compare_scalar(op, sp, kNaN));
             out.push_back(kernels::compare_scalar(op, xi, 0.5));
             out.push_back(kernels::compare_scalar(op, xb, 0.0));
           }
           return out;
         },
     .exact = true},
    // --- where, clamp ----------------------------------------------------------------------------
    {.op = "where",
     .variant = "broadcast over all three, bool and u8 conditions, mixed value dtypes",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor cond = e.input_as({3, 1, 5}, DType::Bool, 80, 0, 1);
           const Tensor cond_u8 = e.input_as({4, 5}, DType::U8, 81, 0, 3);
           const Tensor a = e.input({4, 5}, 82), b = e.input({3, 4, 1}, 83);
           const Tensor ai = e.input_as({5}, DType::I32, 84, -9, 9);
           const Tensor c_big = e.input_as({1025}, DType::Bool, 85, 0, 1);
           const Tensor x_big = e.input({1025}, 86), y_big = e.input({1025}, 87);
           const Tensor pb = e.input_as({4, 5}, DType::Bool, 88, 0, 1), qb = e.input_as({5}, DType::Bool, 89, 0, 1);
           return std::vector<Tensor>{kernels::where(cond, a, b), kernels::where(cond_u8, a, b),
                                      kernels::where(cond, ai, b), kernels::where(c_big, x_big, y_big),
                                      kernels::where(cond_u8, pb, qb)};
         },
     .exact = true},
    {.op = "clamp",
     .variant = "both bounds, one bound, NaN inputs, integer tensors",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor x = e.input({13, 77}, 90, -3, 3);
           const Tensor sp = values_on(e, kSpecials, e.dtype);
           const Tensor xi = e.input_as({3, 41}, DType::I64, 91, -50, 50);
           const Tensor xu = e.input_as({41}, DType::U8, 92, 0, 250);
           return std::vector<Tensor>{kernels::clamp(x, -1.0, 1.5),           kernels::clamp(x, 0.5, std::nullopt),
                                      kernels::clamp(x, std::nullopt, -0.25), kernels::clamp(sp, -2.0, 2.0),
                                      kernels::clamp(sp, -kInf, 0.0),         kernels::clamp(xi, -10.0, 20.0),
                                      kernels::clamp(xu, 3.0, 100.0)};
         },
     .exact = true},
    {.op = "clamp_backward",
     .variant = "both bounds, one bound, NaN inputs, x of another dtype",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Tensor g = e.input({13, 77}, 93), x = e.input({13, 77}, 94, -3, 3);
           const Tensor sp = values_on(e, kSpecials, e.dtype);
           const Tensor gs = e.input({static_cast<int64_t>(kSpecials.size())}, 95);
           const Tensor x32 = e.input_as({13, 77}, DType::F32, 96, -3, 3);
           return std::vector<Tensor>{
               kernels::clamp_backward(g, x, -1.0, 1.5), kernels::clamp_backward(g, x, 0.5, std::nullopt),
               kernels::clamp_backward(g, x, std::nullopt, -0.25), kernels::clamp_backward(gs, sp, -2.0, 2.0),
               kernels::clamp_backward(g, x32, -1.0, 1.0)};
         },
     .exact = true},
    // --- in place --------------------------------------------------------------------------------
    {.op = "add_",
     .variant = "alpha 1 and powers of two (exact fused or not), broadcast and other-dtype sources, strided "
                "destinations, integers",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a = e.input({9, 131}, 100), b = e.input({9, 131}, 101), c = e.input({4099}, 102);
           kernels::add_(a, e.input({9, 131}, 103));
           kernels::add_(b, e.input({131}, 104), 0.5);
           kernels::add_(b, e.input_as({9, 1}, DType::F32, 105, -1, 1), -2.0);
           kernels::add_(c, e.input({4099}, 106), -0.25);
           Tensor t = e.input({12, 8}, 107);
           Tensor tt = t.as_strided({8, 12}, {t.stride(1), t.stride(0)}, t.offset());  // transposed
           kernels::add_(tt, e.input({8, 12}, 108), 4.0);
           Tensor i = e.input_as({3, 37}, DType::I32, 109, -50, 50), u = e.input_as({37}, DType::U8, 110, 0, 256);
           kernels::add_(i, e.input_as({37}, DType::I32, 111, -50, 50), 3.0);
           kernels::add_(u, e.input_as({37}, DType::U8, 112, 0, 256));  // wraps modulo 256
           return std::vector<Tensor>{a, b, c, t, i, u};
         },
     .exact = true},
    {.op = "add_",
     .variant = "alpha 0.3 (one rounding where the compiler fuses the multiply-add)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a = e.input({7, 1029}, 113);
           kernels::add_(a, e.input({1029}, 114), 0.3);
           return std::vector<Tensor>{a};
         }},
    {.op = "mul_scalar_",
     .variant = "float and integer, contiguous and strided",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a = e.input({5, 203}, 120), b = e.input({33}, 121);
           Tensor i = e.input_as({3, 37}, DType::I64, 122, -50, 50), u = e.input_as({37}, DType::U8, 123, 0, 256);
           kernels::mul_scalar_(a, -0.3);
           kernels::mul_scalar_(b, 2.0);
           kernels::mul_scalar_(i, 3.0);
           kernels::mul_scalar_(u, 5.0);
           Tensor m = misaligned(e, 1001, 124);
           kernels::mul_scalar_(m, 1.0 / 3.0);
           return std::vector<Tensor>{a, b, i, u, m};
         },
     .exact = true},
};

}  // namespace
}  // namespace brisk::testing
