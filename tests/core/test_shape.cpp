// Shape arithmetic and the metadata rules of views (core/src/shape.cpp): strides, broadcasting,
// -1 inference, view-compatibility, and each *_meta function with its errors.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include <brisk/core/checked_size.h>
#include <brisk/core/shape.h>
#include <brisk/util/error.h>

using namespace brisk;

namespace {
// Runs fn, expects brisk::Error, and returns its message.
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected brisk::Error";
  return "";
}
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)
}  // namespace

TEST(Shape, NumelMultipliesSizesAndRejectsBadOnes) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(shape_numel({2, 0, 4}), 0);
  EXPECT_CONTAINS(error_of([] { shape_numel({2, -1}); }), "negative size");
  EXPECT_CONTAINS(error_of([] { shape_numel({INT64_MAX, 2}); }), "overflows");
}

TEST(Shape, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({5}), (Strides{1}));
  EXPECT_EQ(contiguous_strides({}), (Strides{}));
  // Zero-size dims do not collapse the outer strides to 0.
  EXPECT_EQ(contiguous_strides({2, 0, 3}), (Strides{3, 3, 1}));
}

TEST(Shape, ShapeStrFormatsLikeAList) {
  EXPECT_EQ(shape_str({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_str({}), "[]");
}

TEST(Shape, WrapDimAcceptsNegativeDimsAndNamesTheOpOnError) {
  EXPECT_EQ(wrap_dim(-1, 3, "sum"), 2);
  EXPECT_EQ(wrap_dim(-3, 3, "sum"), 0);
  EXPECT_EQ(wrap_dim(2, 3, "sum"), 2);
  EXPECT_EQ(wrap_dim(0, 0, "sum"), 0);  // a 0-dim tensor accepts 0 and -1, like PyTorch
  EXPECT_EQ(wrap_dim(-1, 0, "sum"), 0);
  std::string msg = error_of([] { wrap_dim(3, 3, "softmax"); });
  EXPECT_CONTAINS(msg, "softmax");
  EXPECT_CONTAINS(msg, "dim 3");
  EXPECT_CONTAINS(msg, "-3..2");
  EXPECT_THROW(wrap_dim(-4, 3, "x"), Error);
}

TEST(Shape, BroadcastAlignsTrailingDims) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {4}, "add"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 1, 5}, {3, 1}, "add"), (Shape{2, 3, 5}));
  EXPECT_EQ(broadcast_shapes({0}, {1}, "add"), (Shape{0}));
  EXPECT_EQ(broadcast_shapes({4, 3}, {4, 3}, "add"), (Shape{4, 3}));
}

TEST(Shape, BroadcastErrorNamesTheOpAndBothShapes) {
  std::string msg = error_of([] { broadcast_shapes({2, 3}, {3, 3}, "mul"); });
  EXPECT_CONTAINS(msg, "mul");
  EXPECT_CONTAINS(msg, "[2, 3]");
  EXPECT_CONTAINS(msg, "[3, 3]");
  EXPECT_CONTAINS(msg, "2 vs 3");
}

TEST(Shape, InferSizeFillsOneMinusOne) {
  EXPECT_EQ(infer_size({-1, 4}, 12, "view"), (Shape{3, 4}));
  EXPECT_EQ(infer_size({2, -1, 3}, 12, "view"), (Shape{2, 2, 3}));
  EXPECT_EQ(infer_size({2, 6}, 12, "view"), (Shape{2, 6}));
  EXPECT_EQ(infer_size({-1}, 0, "view"), (Shape{0}));
}

TEST(Shape, InferSizeRejectsImpossibleShapes) {
  EXPECT_CONTAINS(error_of([] { infer_size({-1, -1}, 12, "view"); }), "only one dimension can be -1");
  std::string msg = error_of([] { infer_size({-1, 5}, 12, "reshape"); });
  EXPECT_CONTAINS(msg, "reshape");
  EXPECT_CONTAINS(msg, "[-1, 5]");
  EXPECT_CONTAINS(msg, "12");
  EXPECT_CONTAINS(error_of([] { infer_size({2, 3}, 7, "view"); }), "invalid for input of size 7");
  EXPECT_CONTAINS(error_of([] { infer_size({2, -2}, 4, "view"); }), "invalid size -2");
  EXPECT_THROW(infer_size({-1, 0}, 0, "view"), Error);  // ambiguous
}

TEST(Shape, ViewStridesSplitAndMergeContiguousDims) {
  Strides out;
  ASSERT_TRUE(compute_view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}, out));
  EXPECT_EQ(out, (Strides{4, 1}));
  ASSERT_TRUE(compute_view_strides({2, 3, 4}, {12, 4, 1}, {24}, out));
  EXPECT_EQ(out, (Strides{1}));
  ASSERT_TRUE(compute_view_strides({2, 3, 4}, {12, 4, 1}, {2, 3, 2, 2}, out));
  EXPECT_EQ(out, (Strides{12, 4, 2, 1}));
  ASSERT_TRUE(compute_view_strides({}, {}, {1, 1}, out));  // 0-dim -> (1, 1)
  EXPECT_EQ(out, (Strides{1, 1}));
  ASSERT_TRUE(compute_view_strides({2, 0}, {1, 1}, {0, 5}, out));  // empty: any strides will do
  EXPECT_EQ(out, (Strides{5, 1}));
}

TEST(Shape, ViewStridesWorkInsideNonContiguousChunks) {
  Strides out;
  // Columns 0..2 of a (4, 6) matrix: rows stay 6 apart, so splitting rows is fine ...
  ASSERT_TRUE(compute_view_strides({4, 3}, {6, 1}, {2, 2, 3}, out));
  EXPECT_EQ(out, (Strides{12, 6, 1}));
  // ... but merging rows with columns is not.
  EXPECT_FALSE(compute_view_strides({4, 3}, {6, 1}, {12}, out));
  // Size-1 dims may carry any stride.
  ASSERT_TRUE(compute_view_strides({2, 1, 3}, {3, 999, 1}, {6}, out));
  EXPECT_EQ(out, (Strides{1}));
}

TEST(Shape, ViewStridesRefuseToMergeTransposedDims) {
  Strides out;
  EXPECT_FALSE(compute_view_strides({3, 2}, {1, 3}, {6}, out));            // a transposed (2, 3)
  EXPECT_FALSE(compute_view_strides({3, 2, 4}, {4, 12, 1}, {3, 8}, out));  // permuted (2, 3, 4)
  EXPECT_FALSE(compute_view_strides({3, 2, 4}, {4, 12, 1}, {6, 4}, out));
  ASSERT_TRUE(compute_view_strides({3, 2, 4}, {4, 12, 1}, {3, 2, 2, 2}, out));  // splitting is fine
  EXPECT_EQ(out, (Strides{4, 12, 2, 1}));
}

TEST(Shape, PermuteMetaReordersSizesAndStrides) {
  ViewMeta m = permute_meta({2, 3, 4}, {12, 4, 1}, 5, {2, 0, 1});
  EXPECT_EQ(m.sizes, (Shape{4, 2, 3}));
  EXPECT_EQ(m.strides, (Strides{1, 12, 4}));
  EXPECT_EQ(m.offset, 5);
  EXPECT_EQ(permute_meta({2, 3, 4}, {12, 4, 1}, 0, {-1, 0, 1}).sizes, (Shape{4, 2, 3}));
}

TEST(Shape, PermuteMetaRejectsBadDimLists) {
  std::string msg = error_of([] { permute_meta({2, 3}, {3, 1}, 0, {0}); });
  EXPECT_CONTAINS(msg, "permute");
  EXPECT_CONTAINS(msg, "[2, 3]");
  EXPECT_CONTAINS(error_of([] { permute_meta({2, 3}, {3, 1}, 0, {1, 1}); }), "repeated");
  EXPECT_CONTAINS(error_of([] { permute_meta({2, 3}, {3, 1}, 0, {0, 2}); }), "permute");
}

TEST(Shape, TransposeMetaSwapsTwoDims) {
  ViewMeta m = transpose_meta({2, 3, 4}, {12, 4, 1}, 1, 0, -1);
  EXPECT_EQ(m.sizes, (Shape{4, 3, 2}));
  EXPECT_EQ(m.strides, (Strides{1, 4, 12}));
  EXPECT_EQ(m.offset, 1);
  EXPECT_TRUE(transpose_meta({}, {}, 0, 0, 0).sizes.empty());
  EXPECT_CONTAINS(error_of([] { transpose_meta({2, 3}, {3, 1}, 0, 0, 2); }), "transpose");
}

TEST(Shape, NarrowMetaMovesTheOffset) {
  ViewMeta m = narrow_meta({4, 6}, {6, 1}, 0, 1, 2, 3);
  EXPECT_EQ(m.sizes, (Shape{4, 3}));
  EXPECT_EQ(m.strides, (Strides{6, 1}));
  EXPECT_EQ(m.offset, 2);
  EXPECT_EQ(narrow_meta({4, 6}, {6, 1}, 0, 0, 1, 2).offset, 6);
  EXPECT_EQ(narrow_meta({4, 6}, {6, 1}, 0, 1, -2, 2).offset, 4);  // negative start counts from the end
  EXPECT_EQ(narrow_meta({4, 6}, {6, 1}, 0, 1, 6, 0).sizes, (Shape{4, 0}));
}

TEST(Shape, NarrowMetaRejectsOutOfRangeWindows) {
  std::string msg = error_of([] { narrow_meta({4, 6}, {6, 1}, 0, 1, 4, 3); });
  EXPECT_CONTAINS(msg, "narrow");
  EXPECT_CONTAINS(msg, "[4, 6]");
  EXPECT_THROW(narrow_meta({4, 6}, {6, 1}, 0, 1, 0, -1), Error);
  EXPECT_CONTAINS(error_of([] { narrow_meta({}, {}, 0, 0, 0, 1); }), "0-dim");
  EXPECT_THROW(narrow_meta({4, 6}, {6, 1}, 0, 2, 0, 1), Error);
}

TEST(Shape, SelectMetaDropsTheDim) {
  ViewMeta m = select_meta({4, 6}, {6, 1}, 0, 0, 2);
  EXPECT_EQ(m.sizes, (Shape{6}));
  EXPECT_EQ(m.strides, (Strides{1}));
  EXPECT_EQ(m.offset, 12);
  EXPECT_EQ(select_meta({4, 6}, {6, 1}, 0, 0, -1).offset, 18);
  m = select_meta({4, 6}, {6, 1}, 100, -1, 3);
  EXPECT_EQ(m.sizes, (Shape{4}));
  EXPECT_EQ(m.strides, (Strides{6}));
  EXPECT_EQ(m.offset, 103);
}

TEST(Shape, SelectMetaRejectsOutOfRangeIndices) {
  std::string msg = error_of([] { select_meta({4, 6}, {6, 1}, 0, 0, 4); });
  EXPECT_CONTAINS(msg, "select");
  EXPECT_CONTAINS(msg, "index 4");
  EXPECT_CONTAINS(msg, "[4, 6]");
  EXPECT_THROW(select_meta({4, 6}, {6, 1}, 0, 0, -5), Error);
  EXPECT_CONTAINS(error_of([] { select_meta({}, {}, 0, 0, 0); }), "0-dim");
}

TEST(Shape, ExpandMetaBroadcastsWithZeroStrides) {
  ViewMeta m = expand_meta({3, 1}, {1, 1}, 2, {2, 3, 4});
  EXPECT_EQ(m.sizes, (Shape{2, 3, 4}));
  EXPECT_EQ(m.strides, (Strides{0, 1, 0}));
  EXPECT_EQ(m.offset, 2);
  m = expand_meta({3, 1}, {1, 1}, 0, {-1, 5});  // -1 keeps the size
  EXPECT_EQ(m.sizes, (Shape{3, 5}));
  EXPECT_EQ(m.strides, (Strides{1, 0}));
}

TEST(Shape, ExpandMetaRejectsNonSingletonChanges) {
  std::string msg = error_of([] { expand_meta({3, 2}, {2, 1}, 0, {3, 4}); });
  EXPECT_CONTAINS(msg, "expand");
  EXPECT_CONTAINS(msg, "[3, 2]");
  EXPECT_CONTAINS(msg, "[3, 4]");
  EXPECT_CONTAINS(error_of([] { expand_meta({2, 3}, {3, 1}, 0, {3}); }), "fewer dims");
  EXPECT_THROW(expand_meta({3}, {1}, 0, {-1, 3}), Error);  // a new leading dim cannot be -1
}

TEST(Shape, SqueezeMetaDropsSizeOneDims) {
  ViewMeta m = squeeze_meta({1, 3, 1, 2}, {6, 2, 2, 1}, 0, kAllDims);
  EXPECT_EQ(m.sizes, (Shape{3, 2}));
  EXPECT_EQ(m.strides, (Strides{2, 1}));
  EXPECT_EQ(squeeze_meta({1, 3, 1, 2}, {6, 2, 2, 1}, 0, 2).sizes, (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze_meta({1, 3, 1, 2}, {6, 2, 2, 1}, 0, -2).sizes, (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze_meta({1, 3, 1, 2}, {6, 2, 2, 1}, 0, 1).sizes, (Shape{1, 3, 1, 2}));  // size 3: kept
  EXPECT_TRUE(squeeze_meta({}, {}, 0, 0).sizes.empty());
  EXPECT_CONTAINS(error_of([] { squeeze_meta({1, 3}, {3, 1}, 0, 2); }), "squeeze");
}

TEST(Shape, UnsqueezeMetaInsertsASizeOneDim) {
  ViewMeta m = unsqueeze_meta({2, 3}, {3, 1}, 4, 0);
  EXPECT_EQ(m.sizes, (Shape{1, 2, 3}));
  EXPECT_EQ(m.strides, (Strides{6, 3, 1}));
  EXPECT_EQ(m.offset, 4);
  m = unsqueeze_meta({2, 3}, {3, 1}, 0, -1);
  EXPECT_EQ(m.sizes, (Shape{2, 3, 1}));
  EXPECT_EQ(m.strides, (Strides{3, 1, 1}));
  m = unsqueeze_meta({2, 3}, {3, 1}, 0, 1);
  EXPECT_EQ(m.sizes, (Shape{2, 1, 3}));
  EXPECT_EQ(m.strides, (Strides{3, 3, 1}));
  EXPECT_EQ(unsqueeze_meta({}, {}, 0, 0).sizes, (Shape{1}));
  EXPECT_CONTAINS(error_of([] { unsqueeze_meta({2, 3}, {3, 1}, 0, 3); }), "unsqueeze");
  EXPECT_THROW(unsqueeze_meta({2, 3}, {3, 1}, 0, -4), Error);
}

// Zero sizes count as one in strides: [0, 2^32, 2^32] holds no element but its first stride is 2^64.
TEST(Shape, ContiguousStridesRejectOverflowEvenWithAZeroSize) {
  EXPECT_CONTAINS(error_of([] {
                    contiguous_strides({0, int64_t{1} << 32, int64_t{1} << 32});
                  }),
                  "strides overflow int64");
  EXPECT_EQ(contiguous_strides({0, int64_t{1} << 31, int64_t{1} << 31}),
            (Strides{int64_t{1} << 62, int64_t{1} << 31, 1}));
}

TEST(Shape, CheckedNbytesValidatesShapesFromFiles) {
  EXPECT_EQ(checked_nbytes({2, 3}, 4, "t"), 24);
  EXPECT_EQ(checked_nbytes({}, 8, "t"), 8);
  EXPECT_EQ(checked_nbytes({0, 5}, 2, "t"), 0);
  const int64_t big = int64_t{1} << 32;
  EXPECT_CONTAINS(error_of([&] {
                    checked_nbytes({0, big, big}, 1, "file x: tensor \"w\"");
                  }),
                  "file x: tensor \"w\": shape [0, 4294967296, 4294967296] is too large");
  EXPECT_CONTAINS(error_of([] { checked_nbytes({0, 0xFFFFFFFF, 0xFFFFFFFF}, 4, "idx"); }), "overflow int64");
  // Element count fits int64 but the byte size does not.
  EXPECT_CONTAINS(error_of([] { checked_nbytes({int64_t{1} << 61}, 8, "t"); }), "overflow int64");
  EXPECT_EQ(checked_nbytes({int64_t{1} << 59}, 8, "t"), int64_t{1} << 62);
  EXPECT_CONTAINS(error_of([] { checked_nbytes({3, -1}, 4, "t"); }), "t: shape [3, -1] has a negative size -1");
  EXPECT_CONTAINS(error_of([] { checked_nbytes(Shape(65, 1), 4, "t"); }), "65 dims, more than the 64 allowed");
  EXPECT_EQ(checked_nbytes(Shape(64, 1), 4, "t"), 4);
}

TEST(Shape, CheckedArithmeticNamesWhatOverflowed) {
  EXPECT_EQ(checked_mul(3, 5, "x"), 15u);
  EXPECT_EQ(checked_add(3, 5, "x"), 8u);
  EXPECT_CONTAINS(error_of([] { checked_mul(uint64_t{1} << 32, uint64_t{1} << 32, "offsets"); }),
                  "offsets: 4294967296 * 4294967296 overflows");
  EXPECT_CONTAINS(error_of([] { checked_add(UINT64_MAX, 1, "end"); }), "end: 18446744073709551615 + 1 overflows");
}
