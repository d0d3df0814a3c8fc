// Tensor: metadata, element access in every dtype, creation from host data, devices, and printing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <brisk/core/tensor.h>

using namespace brisk;

namespace {
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST(Tensor, EmptyHasContiguousMetadata) {
  Tensor t = empty({2, 3, 4}, DType::F16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.offset(), 0);
  EXPECT_EQ(t.dtype(), DType::F16);
  EXPECT_EQ(t.element_size(), 2u);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.storage()->nbytes(), 48u);
  EXPECT_EQ(t.device(), kCPU);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.is_floating_point());
  EXPECT_FALSE(empty({2}, DType::I32).is_floating_point());
  EXPECT_THROW(t.size(3), Error);
}

TEST(Tensor, ZeroDimTensorHasOneElement) {
  Tensor t = from_vector<float>({2.5f}, {});
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.item<float>(), 2.5f);
}

TEST(Tensor, AsStridedViewsShareStorage) {
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tt = t.as_strided({3, 2}, {1, 3}, 0);  // the transpose
  EXPECT_EQ(tt.storage(), t.storage());
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));  // logical order
  Tensor col = t.as_strided({2}, {3}, 1);
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(static_cast<float*>(col.data_ptr()), t.data<float>() + 1);
  t.data<float>()[4] = 40;
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 40}));
  EXPECT_THROW(t.as_strided({2, 3}, {1}, 0), Error);
}

TEST(Tensor, ContiguityIgnoresSizeOneAndEmptyDims) {
  Tensor t = empty({6});
  EXPECT_TRUE(t.as_strided({2, 1, 3}, {3, 77, 1}, 0).is_contiguous());
  EXPECT_TRUE(t.as_strided({2, 0, 3}, {5, 5, 5}, 0).is_contiguous());
  EXPECT_FALSE(t.as_strided({3}, {2}, 0).is_contiguous());
}

TEST(Tensor, DetachSharesDataWithoutSharingTheHandle) {
  Tensor t = from_vector<int32_t>({1, 2}, {2});
  Tensor d = t.detach();
  EXPECT_FALSE(d.is_same(t));
  EXPECT_EQ(d.storage(), t.storage());
  EXPECT_TRUE(t.is_same(t));
}

TEST(Tensor, ItemReadsEveryDType) {
  EXPECT_EQ(from_vector<double>({-1.25}, {1}).item<double>(), -1.25);
  EXPECT_EQ(from_vector<float>({3.5f}, {1}).item<float>(), 3.5f);
  EXPECT_EQ(from_vector<Half>({Half(0.5f)}, {1}).item<float>(), 0.5f);
  EXPECT_EQ(from_vector<BFloat16>({BFloat16(-3.0f)}, {1}).item<float>(), -3.0f);
  EXPECT_EQ(from_vector<int32_t>({-7}, {1}).item<int32_t>(), -7);
  EXPECT_EQ(from_vector<int64_t>({int64_t{1} << 40}, {1}).item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(from_vector<uint8_t>({200}, {1}).item<uint8_t>(), 200);
  EXPECT_EQ(from_vector<bool>({true}, {1}).item<bool>(), true);
  // item converts to the type asked for.
  EXPECT_EQ(from_vector<float>({3.0f}, {1}).item<int64_t>(), 3);
  EXPECT_EQ(from_vector<int32_t>({5}, {1}).item<double>(), 5.0);
  EXPECT_EQ(from_vector<bool>({true}, {1}).item<float>(), 1.0f);
  EXPECT_EQ(from_vector<Half>({Half(2.0f)}, {1}).item<Half>().bits, Half(2.0f).bits);
}

TEST(Tensor, ItemNeedsExactlyOneElement) {
  try {
    empty({2, 2}).item<float>();
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "item")) << e.what();
    EXPECT_TRUE(contains(e.what(), "[2, 2]")) << e.what();
  }
}

TEST(Tensor, ToVectorConvertsBetweenDTypes) {
  Tensor t = from_vector<float>({1.5f, -2.0f, 0.0f}, {3});
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1.5, -2.0, 0.0}));
  EXPECT_EQ(t.to_vector<bool>(), (std::vector<bool>{true, true, false}));
  Tensor b = from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_TRUE(empty({0, 3}).to_vector<float>().empty());
}

TEST(Tensor, TensorLiteralMakesAOneDimTensor) {
  Tensor t = tensor<int64_t>({4, 5, 6});
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.sizes(), (Shape{3}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6}));
}

TEST(Tensor, FromVectorRejectsAMismatchedShape) {
  try {
    from_vector<float>({1, 2, 3}, {2, 2});
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "from_vector")) << e.what();
    EXPECT_TRUE(contains(e.what(), "3 values")) << e.what();
    EXPECT_TRUE(contains(e.what(), "[2, 2]")) << e.what();
  }
}

TEST(Tensor, DataRejectsTheWrongType) {
  Tensor t = empty({2}, DType::F32);
  EXPECT_NO_THROW(t.data<float>());
  try {
    t.data<double>();
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "f64")) << e.what();
    EXPECT_TRUE(contains(e.what(), "f32")) << e.what();
  }
}

TEST(Tensor, UndefinedTensorsThrowOnUse) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.sizes(), Error);
  EXPECT_THROW(t.numel(), Error);
  EXPECT_EQ(to_string(t), "Tensor(undefined)");
}

TEST(Tensor, EmptyRejectsNegativeSizes) {
  EXPECT_THROW(empty({2, -3}), Error);
}

// The element count fits int64 but the byte count does not: this used to wrap to a tiny allocation.
TEST(Tensor, EmptyRejectsByteSizesThatOverflow) {
  EXPECT_THROW(empty({int64_t{1} << 61}, DType::F64), Error);
  EXPECT_THROW(empty({int64_t{1} << 62, 2}, DType::F32), Error);
  // No element, but strides past int64.
  EXPECT_THROW(empty({0, int64_t{1} << 32, int64_t{1} << 32}, DType::U8), Error);
}

TEST(Tensor, VersionCountsInPlaceChanges) {
  Tensor t = empty({1});
  EXPECT_EQ(t.version(), 0u);
  t.bump_version();
  EXPECT_EQ(t.version(), 1u);
}

TEST(Device, ParsesAndPrintsNames) {
  EXPECT_EQ(Device::parse("cpu"), kCPU);
  EXPECT_EQ(Device::parse("cuda"), cuda_device(0));
  EXPECT_EQ(Device::parse("cuda:3"), cuda_device(3));
  EXPECT_EQ(cuda_device(1).str(), "cuda:1");
  EXPECT_EQ(kCPU.str(), "cpu");
  EXPECT_TRUE(contains(std::string([] {
                         try {
                           Device::parse("tpu");
                         } catch (const Error& e) {
                           return std::string(e.what());
                         }
                         return std::string();
                       }()),
                       "'tpu'"));
  EXPECT_THROW(Device::parse("cuda:x"), Error);
  EXPECT_THROW(Device::parse("cuda:"), Error);
}

TEST(TensorPrinting, ShowsShapeDTypeDeviceAndValues) {
  std::string s = to_string(from_vector<float>({1.5f, -2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
  EXPECT_TRUE(contains(s, "shape=[2, 3]")) << s;
  EXPECT_TRUE(contains(s, "dtype=f32")) << s;
  EXPECT_TRUE(contains(s, "device=cpu")) << s;
  EXPECT_TRUE(contains(s, "[[1.5, -2, 3],")) << s;
  EXPECT_TRUE(contains(s, "[4, 5, 6]]")) << s;
  EXPECT_FALSE(contains(s, "...")) << s;
}

TEST(TensorPrinting, IntegersPrintWithoutDecimals) {
  std::string s = to_string(from_vector<int64_t>({7, -8, 1000000}, {3}));
  EXPECT_TRUE(contains(s, "dtype=i64")) << s;
  EXPECT_TRUE(contains(s, "[7, -8, 1000000]")) << s;
}

TEST(TensorPrinting, ZeroDimPrintsTheValue) {
  std::string s = to_string(from_vector<double>({0.25}, {}));
  EXPECT_TRUE(contains(s, "shape=[]")) << s;
  EXPECT_TRUE(contains(s, "0.25")) << s;
}

TEST(TensorPrinting, BigTensorsAreSummarisedWithEllipses) {
  std::vector<int32_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = i;
  std::string s = to_string(from_vector<int32_t>(v, {1000}));
  EXPECT_TRUE(contains(s, "[0, 1, 2, ..., 997, 998, 999]")) << s;
  EXPECT_FALSE(contains(s, "500")) << s;
  EXPECT_LT(s.size(), 200u);

  std::vector<float> m(size_t{100} * 100, 1.f);
  m[0] = 7.f;
  m[99 * 100 + 99] = 9.f;
  std::string sm = to_string(from_vector<float>(m, {100, 100}));
  EXPECT_TRUE(contains(sm, "shape=[100, 100]")) << sm;
  EXPECT_TRUE(contains(sm, "[7, 1, 1, ..., 1, 1, 1]")) << sm;   // first row
  EXPECT_TRUE(contains(sm, "[1, 1, 1, ..., 1, 1, 9]]")) << sm;  // last row
  EXPECT_TRUE(contains(sm, "...,\n")) << "rows are elided too: " << sm;
  EXPECT_LT(sm.size(), 400u);
}

TEST(CopyBytes, HostToHostIsAMemcpy) {
  std::vector<int32_t> src{1, 2, 3}, dst(3);
  copy_bytes(dst.data(), kCPU, src.data(), kCPU, 12);
  EXPECT_EQ(dst, src);
}
