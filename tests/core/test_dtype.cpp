// DType: the traits table, parsing names, and type promotion.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <brisk/core/dtype.h>
#include <brisk/util/error.h>

using namespace brisk;

namespace {
const DType kAll[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool};
}

TEST(DType, TraitsTableIsIndexedByTheEnum) {
  for (DType t : kAll) EXPECT_EQ(traits(t).dtype, t) << dtype_name(t);
}

TEST(DType, SizesNamesAndKindsAreRight) {
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_EQ(dtype_size(DType::F16), sizeof(Half));
  EXPECT_EQ(dtype_size(DType::BF16), sizeof(BFloat16));
  EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
  EXPECT_STREQ(traits(DType::BF16).safetensors_name, "BF16");
  EXPECT_STREQ(traits(DType::Bool).safetensors_name, "BOOL");
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) EXPECT_TRUE(is_floating(t)) << t;
  for (DType t : {DType::I32, DType::I64, DType::U8, DType::Bool}) EXPECT_FALSE(is_floating(t)) << t;
  EXPECT_FALSE(traits(DType::U8).is_signed);
  EXPECT_TRUE(traits(DType::I32).is_signed);
  static_assert(dtype_size(DType::F64) == 8, "the table is usable at compile time");
}

TEST(DType, StreamsItsShortName) {
  std::ostringstream os;
  os << DType::F16 << ' ' << DType::I64;
  EXPECT_EQ(os.str(), "f16 i64");
}

TEST(DType, CppTypesMapToDTypes) {
  EXPECT_EQ(dtype_of_v<float>, DType::F32);
  EXPECT_EQ(dtype_of_v<Half>, DType::F16);
  EXPECT_EQ(dtype_of_v<BFloat16>, DType::BF16);
  EXPECT_EQ(dtype_of_v<bool>, DType::Bool);
  EXPECT_EQ(dtype_of_v<int64_t>, DType::I64);
  static_assert(std::is_same_v<acc_t<Half>, float> && std::is_same_v<acc_t<double>, double>);
}

TEST(DType, FromNameAcceptsShortLongAndSafetensorsNames) {
  for (DType t : kAll) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
    EXPECT_EQ(dtype_from_name(traits(t).safetensors_name), t);
  }
  EXPECT_EQ(dtype_from_name("float32"), DType::F32);
  EXPECT_EQ(dtype_from_name("float"), DType::F32);
  EXPECT_EQ(dtype_from_name("double"), DType::F64);
  EXPECT_EQ(dtype_from_name("half"), DType::F16);
  EXPECT_EQ(dtype_from_name("fp16"), DType::F16);
  EXPECT_EQ(dtype_from_name("bfloat16"), DType::BF16);
  EXPECT_EQ(dtype_from_name("int64"), DType::I64);
  EXPECT_EQ(dtype_from_name("uint8"), DType::U8);
}

TEST(DType, FromNameRejectsUnknownNamesNamingThem) {
  try {
    dtype_from_name("f8");
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("dtype_from_name"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'f8'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << "lists the accepted names: " << msg;
  }
  EXPECT_THROW(dtype_from_name(""), Error);
  EXPECT_THROW(dtype_from_name("F32 "), Error);
}

TEST(DType, PromotionFollowsTheLattice) {
  EXPECT_EQ(promote_types(DType::Bool, DType::U8), DType::U8);
  EXPECT_EQ(promote_types(DType::U8, DType::I32), DType::I32);
  EXPECT_EQ(promote_types(DType::I32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::I64, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::I64, DType::BF16), DType::BF16);
  EXPECT_EQ(promote_types(DType::F16, DType::BF16), DType::F32);  // neither holds the other
  EXPECT_EQ(promote_types(DType::F16, DType::F32), DType::F32);
  EXPECT_EQ(promote_types(DType::F32, DType::F64), DType::F64);
  EXPECT_EQ(promote_types(DType::Bool, DType::F64), DType::F64);
}

TEST(DType, PromotionIsSymmetricAndIdempotent) {
  for (DType a : kAll) {
    EXPECT_EQ(promote_types(a, a), a);
    for (DType b : kAll) {
      EXPECT_EQ(promote_types(a, b), promote_types(b, a)) << a << " " << b;
      DType p = promote_types(a, b);
      EXPECT_EQ(promote_types(p, a), p) << "the result absorbs its inputs: " << a << " " << b;
      EXPECT_EQ(promote_types(p, b), p) << a << " " << b;
    }
  }
}
