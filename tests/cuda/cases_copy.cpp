// CUDA cases of the copy family: copy_ (broadcast, cross-dtype, strided destination), contiguous,
// cast, to_device and fill_.
#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

using kernels::cast;

const CaseRegistrar copy_cases{
    {.op = "copy_",
     .variant = "broadcast from f32 into a strided destination",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           Tensor dst = e.input({3, 5, 6}, 1);
           Tensor src = e.input_as({5, 1}, DType::F32, 2, -3, 3);
           kernels::copy_(dst, src);
           return std::vector<Tensor>{dst};
         },
     .exact = true},
    {.op = "copy_",
     .variant = "from i64 and bool",
     .run =
         [](const CaseEnv& e) {
           Tensor a = e.input({4, 7}, 3), b = e.input({4, 7}, 4);
           kernels::copy_(a, e.input_as({4, 7}, DType::I64, 5, -50, 50));
           kernels::copy_(b, e.input_as({7}, DType::Bool, 6, 0, 1));
           return std::vector<Tensor>{a, b};
         },
     .exact = true},
    {.op = "contiguous",
     .variant = "transposed and strided views",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({6, 9, 4}, 7);
           Tensor t = x.as_strided({4, 9, 6}, {x.stride(2), x.stride(1), x.stride(0)}, x.offset());
           return std::vector<Tensor>{kernels::contiguous(t), kernels::contiguous(x)};
         },
     .exact = true},
    {.op = "reshaped",
     .variant = "a view where the strides allow it, a copy of a transposed view",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({6, 9, 4}, 8);
           Tensor t = x.as_strided({4, 9, 6}, {x.stride(2), x.stride(1), x.stride(0)}, x.offset());
           return std::vector<Tensor>{kernels::reshaped(x, {54, 4}), kernels::reshaped(t, {36, 6})};
         },
     .exact = true},
    {.op = "cast",
     .variant = "to every dtype and back",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({33, 17}, 8, -300, 300);
           std::vector<Tensor> out;
           for (DType to :
                {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool})
             out.push_back(cast(x, to));
           out.push_back(cast(cast(x, DType::I32), e.dtype));
           return out;
         },
     .exact = true},
    {.op = "to_device",
     .variant = "from the host",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           CaseEnv host = e;
           host.device = kCPU;
           Tensor x = host.input({129, 3}, 9);
           return std::vector<Tensor>{kernels::to_device(x, e.device)};
         },
     .exact = true},
    {.op = "fill_",
     .variant = "contiguous and strided",
     .dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16},
     .run =
         [](const CaseEnv& e) {
           Tensor x = e.input({1000, 3}, 10);
           kernels::fill_(x, 1.0 / 3.0);
           Tensor y = e.input({257}, 11);
           kernels::fill_(y, -7.25);
           return std::vector<Tensor>{x, y};
         },
     .exact = true},
};

}  // namespace
}  // namespace brisk::testing
