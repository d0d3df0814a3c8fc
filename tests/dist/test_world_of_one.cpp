// A process started without a launcher: init() gives a world of one whose collectives are
// identities, and every argument check still runs (on the caller's thread, before any
// communication), so bad calls fail the same way they would in a real job.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cstdlib>
#include <string>
#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;

namespace {

dist::ProcessGroup& self_group() {
  static dist::ProcessGroup& pg = dist::init({.backend = dist::Backend::Self});
  return pg;
}

}  // namespace

TEST(WorldOfOne, FactsAndBackend) {
  auto& pg = self_group();
  EXPECT_EQ(pg.rank(), 0);
  EXPECT_EQ(pg.size(), 1);
  EXPECT_EQ(pg.local_rank(), 0);
  EXPECT_EQ(pg.local_size(), 1);
  EXPECT_EQ(pg.backend(), "self");
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(&dist::world(), &pg);
}

TEST(WorldOfOne, CollectivesAreIdentities) {
  auto& pg = self_group();
  Tensor t = tensor<float>({1.5f, -2.f, 3.f});
  for (auto op :
       {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Prod}) {
    pg.all_reduce(t, {.op = op});
    pg.reduce(t, {.root = 0, .op = op});
  }
  pg.all_reduce(t, {.algorithm = dist::Algorithm::Ring});
  pg.all_reduce(t, {.algorithm = dist::Algorithm::Rhd});
  pg.broadcast(t, {.algorithm = dist::Algorithm::Tree});
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.f, 3.f}));
  EXPECT_EQ(pg.all_gather(t).to_vector<float>(), t.to_vector<float>());
  auto parts = pg.all_gather_uneven(t);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].to_vector<float>(), t.to_vector<float>());
  Tensor out = empty({3});
  pg.reduce_scatter(out, t);
  EXPECT_EQ(out.to_vector<float>(), t.to_vector<float>());
  pg.all_to_all(out, t);
  pg.scatter(out, t, 0);
  pg.gather(out, t, 0);
  EXPECT_EQ(out.to_vector<float>(), t.to_vector<float>());
  pg.barrier();
}

TEST(WorldOfOne, AsyncWorkIsCompleted) {
  Tensor t = tensor<int32_t>({1, 2});
  auto w = self_group().all_reduce_async(t);
  w->wait();
  EXPECT_TRUE(w->is_completed());
  EXPECT_EQ(w->op(), "all_reduce");
  auto w2 = self_group().all_reduce_async(t);
  EXPECT_EQ(w2->seq(), w->seq() + 1);  // collectives are numbered in order
}

TEST(WorldOfOne, NonContiguousTensorIsRejected) {
  Tensor t = empty({4, 4});
  Tensor col = t.as_strided({4}, {4}, 0);
  expect_error([&] { self_group().all_reduce(col); }, "all_reduce: tensor must be contiguous");
}

TEST(WorldOfOne, ShapeMismatchNamesBothShapes) {
  Tensor in = empty({2, 3}), bad = empty({3, 3});
  expect_error([&] { self_group().all_gather(bad, in); }, "all_gather: output: expected shape [2, 3]");
  expect_error([&] { self_group().reduce_scatter(empty({2, 2}), in); }, "reduce_scatter: input: expected shape [2, 2]");
  expect_error([&] { self_group().all_gather(empty({2, 3}, DType::I32), in); }, "all_gather: output dtype i32 differs");
}

TEST(WorldOfOne, BadRootAndPeerAreRejected) {
  Tensor t = empty({2});
  expect_error([&] { self_group().broadcast(t, {.root = 3}); }, "broadcast: root 3 is not a rank");
  expect_error([&] { self_group().send(t, 0); }, "cannot send to itself");
  expect_error([&] { self_group().recv(t, 5); }, "recv: peer 5 is not a rank");
}

TEST(WorldOfOne, BoolTensorsAreRejected) {
  Tensor b = empty({2}, DType::Bool);
  expect_error([&] { self_group().all_reduce(b); }, "bool tensors are not supported");
}

TEST(WorldOfOne, WrongAlgorithmForTheCollective) {
  Tensor t = empty({2});
  expect_error([&] { self_group().all_reduce(t, {.algorithm = dist::Algorithm::Tree}); },
               "not an all-reduce algorithm");
  expect_error([&] { self_group().broadcast(t, {.algorithm = dist::Algorithm::Ring}); }, "not a broadcast algorithm");
}

TEST(WorldOfOne, BackendIsAChoiceUsersSpellAsWords) {
  // InitOptions::backend is an enum (a typo is a compile error); where a user types it, parse_enum
  // reads the words and refuses anything else naming the valid ones.
  EXPECT_EQ(parse_enum<dist::Backend>("auto", "backend"), dist::Backend::Auto);
  EXPECT_EQ(parse_enum<dist::Backend>("mpi", "backend"), dist::Backend::Mpi);
  EXPECT_EQ(parse_enum<dist::Backend>("self", "backend"), dist::Backend::Self);
  EXPECT_EQ(enum_name(dist::Backend::Self), "self");
  expect_error([] { (void)parse_enum<dist::Backend>("nonsense", "dist::init: backend"); },
               "dist::init: backend: 'nonsense' is not valid; expected one of: auto, mpi, self");
}

TEST(WorldOfOne, OptionsAreIgnoredOnceAGroupExists) {
  // init() is idempotent: once a group exists it is returned whatever the options say. The
  // group is created in its own statement (the order in which a call's arguments are evaluated
  // is unspecified).
  dist::ProcessGroup& existing = self_group();
  EXPECT_EQ(&dist::init({.backend = dist::Backend::Mpi}), &existing);
}
