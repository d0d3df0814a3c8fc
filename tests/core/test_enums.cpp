// The enums that replace string choices, and the one parser of user-supplied spellings.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <string>

#include "common/errors.h"

using namespace brisk;
using brisk::testing::error_of;

TEST(Enums, ParseEveryValidSpelling) {
  EXPECT_EQ(parse_enum<Reduction>("none", "r"), Reduction::None);
  EXPECT_EQ(parse_enum<Reduction>("mean", "r"), Reduction::Mean);
  EXPECT_EQ(parse_enum<Reduction>("sum", "r"), Reduction::Sum);
  EXPECT_EQ(parse_enum<GeluApproximation>("none", "g"), GeluApproximation::None);
  EXPECT_EQ(parse_enum<GeluApproximation>("tanh", "g"), GeluApproximation::Tanh);
  EXPECT_EQ(parse_enum<MixedPrecision>("no", "m"), MixedPrecision::No);
  EXPECT_EQ(parse_enum<MixedPrecision>("fp16", "m"), MixedPrecision::FP16);
  EXPECT_EQ(parse_enum<MixedPrecision>("bf16", "m"), MixedPrecision::BF16);
}

TEST(Enums, NamesRoundTrip) {
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum})
    EXPECT_EQ(parse_enum<Reduction>(enum_name(r), "r"), r);
  for (MixedPrecision m : {MixedPrecision::No, MixedPrecision::FP16, MixedPrecision::BF16})
    EXPECT_EQ(parse_enum<MixedPrecision>(enum_name(m), "m"), m);
  EXPECT_EQ(enum_name(GeluApproximation::Tanh), "tanh");
}

TEST(Enums, BadSpellingNamesTheSourceTheValueAndEveryValidOne) {
  const std::string e = error_of([] { (void)parse_enum<MixedPrecision>("FP16", "--mixed_precision"); });
  EXPECT_NE(e.find("--mixed_precision: 'FP16' is not valid; expected one of: no, fp16, bf16"), std::string::npos) << e;
  EXPECT_NE(error_of([] { (void)parse_enum<Reduction>("", "loss.reduction"); }).find("'' is not valid"),
            std::string::npos);
  EXPECT_FALSE(try_parse_enum<Reduction>("avg").has_value());
  EXPECT_EQ(try_parse_enum<Reduction>("sum"), Reduction::Sum);
}
