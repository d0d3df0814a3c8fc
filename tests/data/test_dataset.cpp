// TensorDataset and collation: rows as examples, batches by index_select, and the default
// get_batch that stacks get(i).
#include <gtest/gtest.h>

#include <brisk/brisk.h>

using namespace brisk;
using namespace brisk::data;

namespace {

class Squares : public Dataset {
 public:
  int64_t size() const override { return 5; }
  Example get(int64_t i) const override {
    return Example{full({2}, static_cast<double>(i * i)), tensor<int64_t>({i}).view({})};
  }
};

}  // namespace

TEST(TensorDataset, ExamplesAreRowsOfDataAndTargets) {
  TensorDataset ds(arange(0, 6, 1, {.dtype = DType::F32}).view({3, 2}), tensor<int64_t>({7, 8, 9}));
  EXPECT_EQ(ds.size(), 3);
  Example e = ds.get(1);
  EXPECT_EQ(e.data.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 8);
  EXPECT_THROW(ds.get(3), Error);
  EXPECT_THROW(ds.get(-1), Error);
}

TEST(TensorDataset, GetBatchSelectsRowsInTheGivenOrder) {
  TensorDataset ds(arange(0, 6, 1, {.dtype = DType::F32}).view({3, 2}), tensor<int64_t>({7, 8, 9}));
  Batch b = ds.get_batch({2, 0, 2});
  EXPECT_EQ(b.data.sizes(), (Shape{3, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{4, 5, 0, 1, 4, 5}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{9, 7, 9}));
  EXPECT_THROW(ds.get_batch({0, 3}), Error);
}

TEST(TensorDataset, RejectsMismatchedLengths) {
  try {
    TensorDataset give_me_a_name(zeros({3, 2}), zeros({4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TensorDataset: data has 3 examples"), std::string::npos);
  }
}

TEST(TensorDataset, TargetsAreOptional) {
  TensorDataset ds(zeros({4, 2}), Tensor());
  EXPECT_FALSE(ds.get(0).target.defined());
  EXPECT_FALSE(ds.get_batch({0, 1}).target.defined());
}

TEST(Dataset, DefaultGetBatchStacksExamples) {
  Squares ds;
  Batch b = ds.get_batch({1, 3});
  EXPECT_EQ(b.data.sizes(), (Shape{2, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{1, 1, 9, 9}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
}

TEST(Collate, RejectsMixedMissingTargetsAndMismatchedShapes) {
  EXPECT_THROW(collate({Example{zeros({2}), zeros({})}, Example{zeros({2}), Tensor()}}), Error);
  EXPECT_THROW(collate({Example{zeros({2}), Tensor()}, Example{zeros({3}), Tensor()}}), Error);
  EXPECT_THROW(collate({}), Error);
}
