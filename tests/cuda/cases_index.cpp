// CUDA cases of the index family: cat/stack, index_select, index_add_, gather, scatter,
// scatter_add, masked_fill, tril/triu, pad, one_hot and multinomial, with duplicate indices,
// i32 and i64 indices, 0-d index tensors, negative dims, strided inputs and indices, and the
// atomic (non-deterministic) scatter-adds.
#include <brisk/kernels/index.h>
#include <brisk/kernels/settings.h>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

const std::vector<DType> kNumeric = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};

// Index values in [0, n) of `sizes`, in the env's layout.
Tensor indices(const CaseEnv& e, const Shape& sizes, int64_t n, uint64_t seed, DType dt = DType::I64) {
  return e.input_as(sizes, dt, seed, 0, static_cast<double>(n));
}

// Small integers in the env's dtype: sums of a few of them are exact in any order, so atomicAdd
// results compare exactly with the CPU's.
Tensor small_ints(const CaseEnv& e, const Shape& sizes, uint64_t seed) {
  return kernels::cast(e.input_as(sizes, DType::I32, seed, -4, 4), e.dtype);
}

const CaseRegistrar index_cases{
    {.op = "cat",
     .variant = "dims 0 and -1, with an empty piece",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor a = kernels::cat({e.input({3, 5}, 1), e.input({2, 5}, 2), e.input({0, 5}, 3)}, 0);
           Tensor b = kernels::cat({e.input({4, 3}, 4), e.input({4, 1}, 5)}, -1);
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "stack",
     .variant = "new first and last dims",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> xs = {e.input({4, 7}, 6), e.input({4, 7}, 7), e.input({4, 7}, 8)};
           return std::vector<Tensor>{kernels::stack(xs, 0), kernels::stack(xs, -1)};
         },
     .exact = true},
    {.op = "index_select",
     .variant = "duplicates, i32 and i64, negative dim, 0-d index, vectorised rows",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({5, 33, 7}, 9);
           Tensor a = kernels::index_select(x, 1, indices(e, {50}, 33, 10));
           Tensor b = kernels::index_select(x, -1, indices(e, {9}, 7, 11, DType::I32));
           Tensor c = kernels::index_select(x, 0, indices(e, {}, 5, 12));
           Tensor d = kernels::index_select(e.input({40, 16}, 13), 0, indices(e, {25}, 40, 14));
           Tensor f = kernels::index_select(e.input({}, 15), 0, indices(e, {}, 1, 16));
           return std::vector<Tensor>{a, b, c, d, f};
         },
     .exact = true},
    {.op = "index_add_",
     .variant = "duplicates in index order, strided destination, 0-d index",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor a = e.input({6, 9, 5}, 17);
           kernels::index_add_(a, 1, indices(e, {20}, 9, 18), e.input({6, 20, 5}, 19));
           Tensor b = e.input({40, 3}, 20);
           kernels::index_add_(b, 0, indices(e, {300}, 40, 21, DType::I32), e.input({300, 3}, 22));
           Tensor c = e.input({4, 3}, 23);
           kernels::index_add_(c, -1, indices(e, {}, 3, 24), e.input({4, 1}, 25));
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
    {.op = "index_add_",
     .variant = "atomicAdd (deterministic off)",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           kernels::DeterministicGuard off(false);
           Tensor a = small_ints(e, {40, 3}, 26);
           kernels::index_add_(a, 0, indices(e, {300}, 40, 27), small_ints(e, {300, 3}, 28));
           return std::vector<Tensor>{a};
         },
     .exact = true},
    {.op = "gather",
     .variant = "smaller index, negative dim, i32, 0-d",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({4, 6, 5}, 29);
           Tensor a = kernels::gather(x, 1, indices(e, {4, 9, 3}, 6, 30));
           Tensor b = kernels::gather(x, -1, indices(e, {3, 6, 11}, 5, 31, DType::I32));
           Tensor c = kernels::gather(e.input({}, 32), 0, indices(e, {}, 1, 33));
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
    {.op = "scatter",
     .variant = "last duplicate wins, dims 1 and -2",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({5, 8}, 34);
           Tensor a = kernels::scatter(x, 1, indices(e, {5, 6}, 8, 35), e.input({5, 7}, 36));
           Tensor b = kernels::scatter(x, -2, indices(e, {9, 3}, 5, 37, DType::I32), e.input({9, 8}, 38));
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "scatter_add",
     .variant = "duplicates added in index order",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({5, 8}, 39);
           Tensor a = kernels::scatter_add(x, 1, indices(e, {5, 30}, 8, 40), e.input({5, 30}, 41));
           Tensor b = kernels::scatter_add(x, 0, indices(e, {200, 8}, 5, 42, DType::I32), e.input({200, 9}, 43));
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "scatter_add",
     .variant = "atomicAdd (deterministic off)",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           kernels::DeterministicGuard off(false);
           Tensor x = small_ints(e, {5, 8}, 44);
           return std::vector<Tensor>{
               kernels::scatter_add(x, 0, indices(e, {200, 8}, 5, 45), small_ints(e, {200, 8}, 46))};
         },
     .exact = true},
    {.op = "masked_fill",
     .variant = "broadcast bool mask and u8 mask",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({6, 7}, 47);
           Tensor a = kernels::masked_fill(x, e.input_as({7}, DType::Bool, 48, 0, 1), -1.5);
           Tensor b = kernels::masked_fill(x, e.input_as({6, 7}, DType::U8, 49, 0, 2), 3.0);
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "tril",
     .variant = "batched non-square, several diagonals",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({3, 5, 7}, 50);
           return std::vector<Tensor>{kernels::tril(x), kernels::tril(x, -1), kernels::tril(x, 2)};
         },
     .exact = true},
    {.op = "triu",
     .variant = "batched non-square, several diagonals",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({2, 9, 4}, 51);
           return std::vector<Tensor>{kernels::triu(x), kernels::triu(x, 1), kernels::triu(x, -3)};
         },
     .exact = true},
    {.op = "pad",
     .variant = "two dims, and a negative pad that crops",
     .dtypes = kNumeric,
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({3, 4, 5}, 52);
           return std::vector<Tensor>{kernels::pad(x, {1, 2, 0, 1}, 0.5), kernels::pad(x, {-1, 1})};
         },
     .exact = true},
    {.op = "one_hot",
     .variant = "given and inferred class counts, i32 and i64",
     .run =
         [](const CaseEnv& e) {
           Tensor a = kernels::one_hot(indices(e, {3, 4}, 6, 53), 6);
           Tensor b = kernels::one_hot(indices(e, {7}, 9, 54, DType::I32));
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "multinomial",
     .variant = "with and without replacement, 1-D and 2-D, the CPU's draws",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Generator gen(55);
           Tensor p2 = e.input({4, 50}, 56, 0.0, 1.0);
           Tensor a = kernels::multinomial(p2, 20, /*replacement=*/true, &gen);
           Tensor b = kernels::multinomial(p2, 10, /*replacement=*/false, &gen);
           Tensor c = kernels::multinomial(e.input({37}, 57, 0.0, 1.0), 5, /*replacement=*/false, &gen);
           return std::vector<Tensor>{a, b, c};
         },
     .exact = true},
};

}  // namespace
}  // namespace brisk::testing
