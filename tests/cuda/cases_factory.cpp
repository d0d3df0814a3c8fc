// CUDA cases of the factories: fills (zeros, ones, full and the *_like forms) made on the device,
// arange and linspace computed there, and the random factories drawing on the device from the
// same Philox counters as the CPU (so every case compares bit for bit, random ones included).
// Lengths are odd (vector tails); uniform_ and normal_ also fill strided and transposed views.
#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

TensorOptions on(const CaseEnv& e, DType dt) {
  return {.dtype = dt, .device = e.device};
}

// A transposed view (last two dims swapped) of a fresh tensor on the env's device.
Tensor transposed(const CaseEnv& e, int64_t rows, int64_t cols) {
  Tensor t = zeros({cols, rows}, on(e, e.dtype));
  return t.as_strided({rows, cols}, {1, rows}, t.offset());
}

const CaseRegistrar factory_cases{
    {.op = "zeros",
     .variant = "every dtype, odd sizes",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (DType dt : {e.dtype, DType::I32, DType::I64, DType::U8, DType::Bool})
             out.push_back(zeros({7, 129}, on(e, dt)));
           out.push_back(zeros({}, on(e, e.dtype)));
           out.push_back(zeros({0, 3}, on(e, e.dtype)));
           return out;
         },
     .exact = true},
    {.op = "ones",
     .variant = "every dtype, odd sizes",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           for (DType dt : {e.dtype, DType::I32, DType::I64, DType::U8, DType::Bool})
             out.push_back(ones({1001}, on(e, dt)));
           return out;
         },
     .exact = true},
    {.op = "full",
     .variant = "values that round in 16 bits, negative zero, integers",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{full({3, 333}, 1.0 / 3.0, on(e, e.dtype)), full({17}, -0.0, on(e, e.dtype)),
                                      full({5, 5}, 65519.0, on(e, e.dtype)),     full({31}, -7.0, on(e, DType::I64)),
                                      full({33}, 200.0, on(e, DType::U8)),       full({9}, 2.0, on(e, DType::Bool))};
         },
     .exact = true},
    {.op = "zeros_like",
     .variant = "shape, dtype and device of a strided input",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{zeros_like(e.input({6, 35}, 1))};
         },
     .exact = true},
    {.op = "ones_like",
     .variant = "shape, dtype and device of a strided input",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{ones_like(e.input({6, 35}, 2))};
         },
     .exact = true},
    {.op = "full_like",
     .variant = "shape, dtype and device of a strided input",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{full_like(e.input({6, 35}, 3), -2.5),
                                      full_like(e.input_as({19}, DType::I32, 4, -5, 5), 11.0)};
         },
     .exact = true},
    {.op = "empty_like",
     .variant = "shape, dtype and device (filled afterwards, so the values compare)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor t = empty_like(e.input({6, 35}, 5));
           kernels::fill_(t, 0.125);
           return std::vector<Tensor>{t};
         },
     .exact = true},
    {.op = "arange",
     .variant = "float and integer dtypes, fractional and negative steps, odd lengths",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{
               arange(-3.5, 200.0, 0.7, on(e, e.dtype)),  arange(5.0, -4.0, -0.3, on(e, e.dtype)),
               arange(1003, on(e, DType::I64)),           arange(-20.0, 21.0, 3.0, on(e, DType::I32)),
               arange(0.0, 250.0, 1.0, on(e, DType::U8)), arange(0.0, 0.0, 1.0, on(e, e.dtype))};
         },
     .exact = true},
    {.op = "linspace",
     .variant = "both ends exact, one and two steps, integer dtype",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{linspace(-1.0, 7.3, 1001, on(e, e.dtype)), linspace(0.1, 0.7, 7, on(e, e.dtype)),
                                      linspace(2.0, 3.0, 1, on(e, e.dtype)), linspace(2.0, 3.0, 2, on(e, e.dtype)),
                                      linspace(-50.0, 50.0, 37, on(e, DType::I64))};
         },
     .exact = true},
    {.op = "rand",
     .variant = "the CPU's values bit for bit, odd sizes",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator g(7);
           g.reserve(3);
           return std::vector<Tensor>{rand({1000, 3}, on(e, e.dtype), &g), rand({7}, on(e, e.dtype), &g),
                                      rand({}, on(e, e.dtype), &g)};
         },
     .exact = true},
    {.op = "randn",
     .variant = "the CPU's values bit for bit, odd sizes",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator g(8);
           return std::vector<Tensor>{randn({513, 5}, on(e, e.dtype), &g), randn({3}, on(e, e.dtype), &g)};
         },
     .exact = true},
    {.op = "randint",
     .variant = "i64 by default, other dtypes, a range beyond 32 bits",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator g(9);
           return std::vector<Tensor>{randint(-5, 17, {1001}, {.dtype = DType::I64, .device = e.device}, &g),
                                      randint(0, 200, {67}, on(e, DType::U8), &g),
                                      randint(-1000, 1000, {3, 41}, on(e, DType::I32), &g),
                                      randint(0, 2, {45}, on(e, DType::Bool), &g),
                                      randint(-3, 9, {29}, on(e, e.dtype), &g),
                                      randint(-(int64_t{1} << 40), int64_t{1} << 40, {15}, on(e, DType::I64), &g)};
         },
     .exact = true},
    {.op = "uniform_",
     .variant = "contiguous, strided and transposed tensors",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator g(10);
           Tensor a = e.input({37, 29}, 11), b = transposed(e, 9, 14), c = zeros({4099}, on(e, e.dtype));
           uniform_(a, -2.0, 3.0, &g);
           uniform_(b, 0.0, 1.0, &g);
           uniform_(c, -1.0, 1.0, &g);
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
    {.op = "normal_",
     .variant = "contiguous, strided and transposed tensors",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator g(12);
           Tensor a = e.input({37, 29}, 13), b = transposed(e, 9, 14), c = zeros({4099}, on(e, e.dtype));
           normal_(a, 0.5, 2.0, &g);
           normal_(b, 0.0, 1.0, &g);
           normal_(c, -3.0, 0.1, &g);
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
};

}  // namespace
}  // namespace brisk::testing
