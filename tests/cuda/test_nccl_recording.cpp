// The CUDA path of dist, checked without a GPU: a fake world of 2 ranks (dist::fake_group) in
// CUDA recording mode, where every kernel, copy, event and NCCL call is logged instead of run.
// Collectives on CUDA tensors are enqueued on a communication stream after an event recorded on
// the caller's stream, and wait() makes the caller's stream (not the host) wait; the Reducer
// all-reduces each bucket there as soon as it is full, during backward, and the optimizer step
// is ordered after the last bucket by an event wait, with no host synchronisation. Also the
// fake world's host semantics (every rank holds this rank's data).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <set>
#include <string>

#include "gpu_skip.h"

using namespace brisk;
using cuda::recording::Entry;
using cuda::recording::Kind;

namespace {

bool is_library(const Entry& e, const char* name) {
  return e.kind == Kind::Library && e.name == name;
}

std::vector<size_t> indices(const std::vector<Entry>& es, const std::function<bool(const Entry&)>& pred) {
  std::vector<size_t> out;
  for (size_t i = 0; i < es.size(); ++i)
    if (pred(es[i])) out.push_back(i);
  return out;
}

// The entry before `before` (searching backwards) that satisfies pred; es.size() if none.
size_t last_before(const std::vector<Entry>& es, size_t before, const std::function<bool(const Entry&)>& pred) {
  for (size_t i = before; i-- > 0;)
    if (pred(es[i])) return i;
  return es.size();
}

}  // namespace

TEST(FakeGroup, EveryRankHoldsThisRanksData) {
  auto pg = dist::fake_group(3, 1);
  EXPECT_EQ(pg->size(), 3);
  EXPECT_EQ(pg->rank(), 1);
  EXPECT_EQ(pg->backend(), "fake");
  Tensor t = from_vector<float>({1, 2}, {2});
  pg->all_reduce(t);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3, 6}));
  pg->all_reduce(t, {.op = dist::ReduceOp::Avg});
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3, 6}));
  pg->all_reduce(t, {.op = dist::ReduceOp::Max});
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(pg->all_gather(from_vector<int64_t>({7}, {1})).to_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7}));
  Tensor out = zeros({1});
  pg->reduce_scatter(out, from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{6}));  // block 1, summed over 3 ranks
  EXPECT_THROW(dist::fake_group(2, 2), Error);
}

TEST(FakeGroup, TheReducerAveragesIdenticalGradientsToThemselves) {
  auto pg = dist::fake_group(4);
  Tensor a = zeros({3}), b = zeros({2, 2});
  a.requires_grad_();
  b.requires_grad_();
  dist::Reducer reducer({{"a", a}, {"b", b}}, *pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  add(mul(a.sum(), full({}, 2.0)), mul(b.sum(), full({}, 3.0))).backward();
  for (float g : a.grad().to_vector<float>()) EXPECT_EQ(g, 2.0f);
  for (float g : b.grad().to_vector<float>()) EXPECT_EQ(g, 3.0f);
  EXPECT_EQ(reducer.last_step_events().size(), 2u);
}

TEST(NcclRecording, ACollectiveRunsOnTheCommStreamAfterTheCallersStreamAndWaitIsAStreamWait) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  auto pg = dist::fake_group(2);
  cuda::Stream compute = cuda::Stream::create(0);
  cuda::StreamGuard on_compute(compute);
  const uint64_t compute_id = cuda::recording::stream_id(compute.handle());
  Tensor t = zeros({1000}, {.device = cuda_device(0)});
  rec.clear();
  dist::WorkPtr w = pg->all_reduce_async(t, {.op = dist::ReduceOp::Avg});
  auto es = rec.entries();
  ASSERT_EQ(es.size(), 4u);
  EXPECT_EQ(es[0].kind, Kind::EventRecord);
  EXPECT_EQ(es[0].stream, compute_id);
  EXPECT_EQ(es[1].kind, Kind::EventWait);
  EXPECT_EQ(es[1].event, es[0].event);
  const uint64_t comm_id = es[1].stream;
  EXPECT_NE(comm_id, compute_id);
  EXPECT_NE(comm_id, 0u) << "not the legacy default stream";
  EXPECT_TRUE(is_library(es[2], "ncclAllReduce"));
  EXPECT_EQ(es[2].stream, comm_id);
  EXPECT_EQ(es[3].kind, Kind::EventRecord);
  EXPECT_EQ(es[3].stream, comm_id);
  EXPECT_EQ(w->device(), cuda_device(0));
  rec.clear();
  w->wait();
  es = rec.entries();
  ASSERT_EQ(es.size(), 1u);
  EXPECT_EQ(es[0].kind, Kind::EventWait) << "wait() orders the caller's stream, the host does not wait";
  EXPECT_EQ(es[0].stream, compute_id);
  rec.clear();
  w->synchronize();
  EXPECT_EQ(rec.count(Kind::Sync), 1u) << "synchronize() is the explicit host wait";

  // The other collectives take the same path, each with its own NCCL call, and never sync.
  Tensor part = zeros({500}, {.device = cuda_device(0)});
  rec.clear();
  pg->broadcast(t);
  Tensor gathered = pg->all_gather(t);
  pg->reduce_scatter(part, t);
  pg->gather(gathered, t, 0);
  pg->send(t, 1);
  pg->recv(t, 1);
  es = rec.entries();
  std::set<std::string> calls;
  for (const Entry& e : es)
    if (e.kind == Kind::Library) {
      calls.insert(e.name);
      EXPECT_EQ(e.stream, comm_id) << e.name;
    }
  EXPECT_EQ(calls, (std::set<std::string>{"ncclBroadcast", "ncclAllGather", "ncclReduceScatter", "ncclGroupStart",
                                          "ncclRecv", "ncclGroupEnd", "ncclSend"}));
  EXPECT_EQ(rec.count(Kind::Sync), 0u);
  EXPECT_EQ(gathered.device(), cuda_device(0));
}

TEST(NcclRecording, ReducerAllReducesEachBucketOnTheCommStreamDuringBackwardWithoutHostSyncs) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  auto pg = dist::fake_group(2);
  cuda::Stream compute = cuda::Stream::create(0);
  cuda::StreamGuard on_compute(compute);
  const uint64_t compute_id = cuda::recording::stream_id(compute.handle());

  // A small two-layer model's parameters on the GPU, in registration order.
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"fc1.weight", {16, 8}}, {"fc1.bias", {16}}, {"fc2.weight", {4, 16}}, {"fc2.bias", {4}}};
  std::vector<std::pair<std::string, Tensor>> named;
  std::vector<Tensor> params;
  for (const auto& [name, s] : shapes) {
    Tensor p = zeros(s, {.device = cuda_device(0)});
    p.requires_grad_();
    named.emplace_back(name, p);
    params.push_back(p);
  }
  // Reverse order: fc2.bias (16 B) alone in the first bucket (<= 20 B), then fc2.weight + fc1.bias
  // (320 B <= 629 B), then fc1.weight.
  dist::Reducer reducer(named, *pg, {.bucket_cap_mb = 0.0006, .first_bucket_mb = 0.00002});
  ASSERT_EQ(reducer.buckets().size(), 3u);
  optim::SGD opt(params, {.lr = 0.1});

  for (int step = 0; step < 2; ++step) {
    // The forward pass only needs kernels every build has on the GPU: a differentiable cast of
    // each parameter; backward casts the incoming gradients back, then the hooks fire.
    std::vector<Tensor> roots, seeds;
    for (const Tensor& p : params) {
      roots.push_back(p.to(DType::F64));
      seeds.push_back(ones(p.sizes(), {.dtype = DType::F64, .device = cuda_device(0)}));
    }
    rec.clear();
    autograd::backward(roots, seeds);
    const std::vector<Entry> bw = rec.entries();
    rec.clear();
    opt.step();
    const std::vector<Entry> st = rec.entries();
    opt.zero_grad();

    EXPECT_EQ(indices(bw, [](const Entry& e) { return e.kind == Kind::Sync; }).size(), 0u)
        << "no host synchronisation during backward";
    const std::vector<size_t> nccl = indices(bw, [](const Entry& e) { return is_library(e, "ncclAllReduce"); });
    ASSERT_EQ(nccl.size(), 3u) << "one all-reduce per bucket";
    const uint64_t comm_id = bw[nccl[0]].stream;
    EXPECT_NE(comm_id, compute_id);
    size_t prev = 0;
    std::vector<uint64_t> done_events;
    for (size_t b = 0; b < nccl.size(); ++b) {
      const size_t at = nccl[b];
      EXPECT_EQ(bw[at].stream, comm_id);
      // ... preceded (since the previous bucket) by: an event recorded on the compute stream,
      // which the communication stream then waits for.
      const size_t wait = last_before(bw, at, [&](const Entry& e) { return e.kind == Kind::EventWait; });
      ASSERT_LT(wait, bw.size());
      EXPECT_GE(wait, prev);
      EXPECT_EQ(bw[wait].stream, comm_id);
      const size_t record = last_before(bw, wait, [&](const Entry& e) { return e.kind == Kind::EventRecord; });
      ASSERT_LT(record, bw.size());
      EXPECT_EQ(bw[record].stream, compute_id);
      EXPECT_EQ(bw[record].event, bw[wait].event);
      // The bucket's gradients were copied in on the compute stream before that event.
      const size_t fill = last_before(bw, record, [&](const Entry& e) { return e.kind == Kind::Copy; });
      ASSERT_LT(fill, bw.size());
      EXPECT_EQ(bw[fill].stream, compute_id);
      // ... and followed by the bucket's completion event on the communication stream.
      ASSERT_LT(at + 1, bw.size());
      EXPECT_EQ(bw[at + 1].kind, Kind::EventRecord);
      EXPECT_EQ(bw[at + 1].stream, comm_id);
      done_events.push_back(bw[at + 1].event);
      prev = at;
    }
    // The first bucket launched before the last gradient was even computed: overlap.
    const std::vector<size_t> compute_work = indices(
        bw, [&](const Entry& e) { return (e.kind == Kind::Launch || e.kind == Kind::Copy) && e.stream == compute_id; });
    ASSERT_FALSE(compute_work.empty());
    EXPECT_LT(nccl[0], compute_work.back());
    // At the end of backward the compute stream waits for every bucket, the last one included,
    // and only then copies the averages back into p.grad().
    const size_t last_wait = last_before(bw, bw.size(), [&](const Entry& e) {
      return e.kind == Kind::EventWait && e.stream == compute_id && e.event == done_events.back();
    });
    ASSERT_LT(last_wait, bw.size()) << "the compute stream must wait for the last bucket";
    EXPECT_GT(last_wait, nccl.back());
    for (uint64_t ev : done_events)
      EXPECT_LT(last_before(bw, bw.size(),
                            [&](const Entry& e) {
                              return e.kind == Kind::EventWait && e.stream == compute_id && e.event == ev;
                            }),
                bw.size());
    const size_t copy_back = last_before(bw, bw.size(), [&](const Entry& e) { return e.kind == Kind::Copy; });
    EXPECT_GT(copy_back, last_wait);
    EXPECT_EQ(bw[copy_back].stream, compute_id);

    // The optimizer step: fused launches on the compute stream (after that wait), no sync.
    const std::vector<size_t> updates =
        indices(st, [](const Entry& e) { return e.kind == Kind::Launch && e.name == "sgd_step"; });
    ASSERT_FALSE(updates.empty());
    for (size_t i : updates) EXPECT_EQ(st[i].stream, compute_id);
    EXPECT_EQ(indices(st, [](const Entry& e) { return e.kind == Kind::Sync; }).size(), 0u);
  }
  for (const Tensor& p : params) EXPECT_EQ(p.device(), cuda_device(0));
  EXPECT_EQ(reducer.last_step_events().size(), 3u);
}

TEST(NcclRecording, NcclVersionIsReportedForBriskEnv) {
  const int v = dist::nccl_version();
  if (v == 0) GTEST_SKIP() << "this build of brisk has no NCCL";
  EXPECT_GE(v, 20000);  // 2.x.y as major * 10000 + minor * 100 + patch
}
