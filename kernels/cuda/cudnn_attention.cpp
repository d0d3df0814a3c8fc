// cuDNN's fused flash attention through cuDNN 9's graph API, built with its backend descriptors
// (cudnnBackendCreateDescriptor / SetAttribute / Finalize): the graphs of the forward (scores,
// scale, causal mask, softmax with its logsumexp "stats", P V) and backward (dQ, dK, dV from dO,
// O and the stats) that cuDNN's fused attention engines recognise, an engine from its heuristics
// (mode A), one execution plan per problem kept in an SdpaPlanCache, and per call a variant pack
// and cudnnBackendExecute. The graphs follow the composite SDPA graphs cuDNN documents for 9.x
// (one pointwise, matmul, reduction or reshape node per step, f32 intermediates, P and dS rounded
// to the input dtype before their products). Workspaces (cuDNN's, plus the backward's f32 row sums
// and dQ accumulator, which the graph names as tensors) come from the caching allocator.
#include "cuda/cudnn_attention.h"

#include <cudnn.h>

#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "brisk/kernels/attention.h"
#include "brisk/kernels/attention_plan.h"
#include "brisk/kernels/settings.h"
#include "cuda/library.h"
#include "cuda/runtime.h"

namespace brisk::kernels::cuda {

namespace {

namespace bd = brisk::cuda::detail;

using Dims = std::array<int64_t, 4>;

// cuDNN 9.6 is the first whose attention backward needs no zero-filled dQ accumulator.
constexpr int64_t kMinCudnnVersion = 90600;
constexpr int64_t kAlign = 256;  // bytes between the parts of one workspace

[[noreturn]] void fail(cudnnStatus_t st, const char* what) {
  bd::throw_cudnn_error(st, what, __FILE__, __LINE__);
}

// An owned cuDNN backend descriptor (a host object; a null one is what recording mode keeps).
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    if (const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d_); st != CUDNN_STATUS_SUCCESS)
      fail(st, "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count = 1) {
    if (const cudnnStatus_t st = cudnnBackendSetAttribute(d_, name, type, count, values); st != CUDNN_STATUS_SUCCESS)
      fail(st, "cudnnBackendSetAttribute");
  }
  void set(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t h = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &h);
  }
  void finalize(const char* what) {
    if (const cudnnStatus_t st = cudnnBackendFinalize(d_); st != CUDNN_STATUS_SUCCESS) fail(st, what);
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

cudnnDataType_t io_type(DType dt) {
  return dt == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

Dims contiguous(const Dims& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

// A (.., rows, cols) operand read as its transpose (.., cols, rows): the same memory.
Dims swap_last(const Dims& d) {
  return {d[0], d[1], d[3], d[2]};
}

// The tensor ids of a graph's operands (what the variant pack names); intermediates count up from
// kFirstVirtual.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegInf,
  kDO,
  kDQ,
  kDK,
  kDV,
  kOne,
  kSoftmaxSum,
  kDQAccum,
  kFirstVirtual = 100,
};

// One operation graph under construction: its tensors and operation descriptors, each finalized
// as it is made (so a detail cuDNN rejects names the node it belongs to).
class Graph {
 public:
  const Desc& tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual = false,
                     bool by_value = false) {
    Desc& t = tensors_.emplace_back(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4);
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4);
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align);
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    t.finalize("cudnnBackendFinalize(tensor)");
    return t;
  }
  // An f32 scalar passed by value at execution (the scale, -inf, 1).
  const Desc& scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }
  // An intermediate the fused engine keeps in registers or shared memory.
  const Desc& virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_uid_++, type, dims, strides, true);
  }
  const Desc& virt(cudnnDataType_t type, const Dims& dims) { return virt(type, dims, contiguous(dims)); }

  // y = mode(x, b) (b may be null; t: the condition of BINARY_SELECT; axis: GEN_INDEX's).
  void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y, const Desc* t = nullptr,
                 int64_t axis = -1, cudnnDataType_t prec = CUDNN_DATA_FLOAT) {
    Desc& pw = descs_.emplace_back(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize("cudnnBackendFinalize(pointwise)");
    Desc& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op.finalize("cudnnBackendFinalize(pointwise operation)");
  }
  // c = a b over the last two dims, batched over the first two; f32 accumulation.
  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc& mm = descs_.emplace_back(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp);
    mm.finalize("cudnnBackendFinalize(matmul)");
    Desc& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    op.finalize("cudnnBackendFinalize(matmul operation)");
  }
  // y = reduce(x) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc& red = descs_.emplace_back(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode);
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp);
    red.finalize("cudnnBackendFinalize(reduction)");
    Desc& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    op.finalize("cudnnBackendFinalize(reduction operation)");
  }
  // y: x under other dims and strides (a transpose, here).
  void reshape(const Desc& x, const Desc& y) {
    Desc& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize("cudnnBackendFinalize(reshape operation)");
  }

  std::vector<cudnnBackendDescriptor_t> ops() const {
    std::vector<cudnnBackendDescriptor_t> out;
    out.reserve(ops_.size());
    for (const Desc& d : ops_) out.push_back(d.get());
    return out;
  }

 private:
  std::deque<Desc> tensors_, descs_, ops_;  // deques: references stay valid as they grow
  int64_t next_uid_ = kFirstVirtual;
};

// x where the key is not after the query (column <= row), -inf elsewhere: cuDNN's top-left causal
// mask, as two index generators, a comparison and a select.
const Desc& causal_mask(Graph& g, const Desc& x, const Dims& dims) {
  const Desc& row = g.virt(CUDNN_DATA_INT32, dims);
  const Desc& col = g.virt(CUDNN_DATA_INT32, dims);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, row, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, col, nullptr, 3);
  const Desc& keep = g.virt(CUDNN_DATA_BOOLEAN, dims);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, -1, CUDNN_DATA_BOOLEAN);
  const Desc& neg_inf = g.scalar(kNegInf);
  const Desc& y = g.virt(CUDNN_DATA_FLOAT, dims);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, &neg_inf, y, &keep);
  return y;
}

// out = softmax(scale * q k^T [masked]) v, stats = logsumexp of each row of the scaled scores.
void forward_graph(Graph& g, const SdpaPlanKey& key) {
  const auto [B, H, Tq, Tk, D] = key.dims;
  const cudnnDataType_t io = io_type(key.dtype), f32 = CUDNN_DATA_FLOAT;
  const Dims sd{B, H, Tq, Tk}, rows{B, H, Tq, 1};
  const Desc& q = g.tensor(kQ, io, {B, H, Tq, D}, key.strides[0]);
  const Desc& kt = g.tensor(kK, io, {B, H, D, Tk}, swap_last(key.strides[1]));
  const Desc& v = g.tensor(kV, io, {B, H, Tk, D}, key.strides[2]);
  const Desc& o = g.tensor(kO, io, {B, H, Tq, D}, key.strides[3]);
  const Desc& stats = g.tensor(kStats, f32, rows, contiguous(rows));
  const Desc& scale = g.scalar(kScale);

  const Desc& s = g.virt(f32, sd);
  g.matmul(q, kt, s);
  const Desc& scaled = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, s, &scale, scaled);
  const Desc& scores = key.causal ? causal_mask(g, scaled, sd) : scaled;

  const Desc& m = g.virt(f32, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, m);
  const Desc& centred = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, &m, centred);
  const Desc& e = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, e);
  const Desc& z = g.virt(f32, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  const Desc& log_z = g.virt(f32, rows);
  g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, log_z);
  g.pointwise(CUDNN_POINTWISE_ADD, m, &log_z, stats);
  const Desc& p = g.virt(io, sd);  // P in the input dtype for the tensor-core product
  g.pointwise(CUDNN_POINTWISE_DIV, e, &z, p);
  g.matmul(p, v, o);
}

// dq, dk, dv from dO, O and the stats: P = exp(scale q k^T - stats) [masked], dV = P^T dO,
// dS = P (dO V^T - rowsum(dO O)) scale, dK = dS^T Q, dQ = dS K. `dq_direct`: dQ straight from the
// product (cuDNN's deterministic form, with a dP workspace); else through an f32 accumulator that
// the engine adds into with atomics.
void backward_graph(Graph& g, const SdpaPlanKey& key, bool dq_direct) {
  const auto [B, H, Tq, Tk, D] = key.dims;
  const cudnnDataType_t io = io_type(key.dtype), f32 = CUDNN_DATA_FLOAT;
  const Dims sd{B, H, Tq, Tk}, rows{B, H, Tq, 1}, sd_t{B, H, Tk, Tq};
  const Dims sd_t_strides{H * Tq * Tk, Tq * Tk, 1, Tk};  // (Tq, Tk) scores read as (Tk, Tq)
  const Desc& q = g.tensor(kQ, io, {B, H, Tq, D}, key.strides[0]);
  const Desc& kt = g.tensor(kK, io, {B, H, D, Tk}, swap_last(key.strides[1]));
  const Desc& vt = g.tensor(kV, io, {B, H, D, Tk}, swap_last(key.strides[2]));
  const Desc& o = g.tensor(kO, io, {B, H, Tq, D}, key.strides[3]);
  const Desc& d_o = g.tensor(kDO, io, {B, H, Tq, D}, key.strides[4]);
  const Desc& dq = g.tensor(kDQ, io, {B, H, Tq, D}, key.strides[5]);
  const Desc& dk = g.tensor(kDK, io, {B, H, Tk, D}, key.strides[6]);
  const Desc& dv = g.tensor(kDV, io, {B, H, Tk, D}, key.strides[7]);
  const Desc& stats = g.tensor(kStats, f32, rows, contiguous(rows));
  const Desc& scale = g.scalar(kScale);
  const Desc& one = g.scalar(kOne);

  // rowsum(dO * O), kept in the workspace for the dS step.
  const Desc& do_o = g.virt(f32, {B, H, Tq, D}, {H * Tq * D, Tq * D, H * D, 1});
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, &o, do_o);
  const Desc& row_sum = g.virt(f32, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  const Desc& softmax_sum = g.tensor(kSoftmaxSum, f32, rows, contiguous(rows));
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, &one, softmax_sum);

  // P from the scores and the forward's stats.
  const Desc& s = g.virt(f32, sd);
  g.matmul(q, kt, s);
  const Desc& scaled = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, s, &scale, scaled);
  const Desc& centred = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_SUB, scaled, &stats, centred);
  const Desc& masked = key.causal ? causal_mask(g, centred, sd) : centred;
  const Desc& p = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_EXP, masked, nullptr, p);

  const Desc& p_t = g.virt(io, sd_t, sd_t_strides);
  g.reshape(p, p_t);
  g.matmul(p_t, d_o, dv);

  const Desc& dp = g.virt(f32, sd);
  g.matmul(d_o, vt, dp);
  const Desc& dp_centred = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum, dp_centred);
  const Desc& ds_unscaled = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, dp_centred, &p, ds_unscaled);
  const Desc& ds = g.virt(f32, sd);
  g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, &scale, ds);

  const Desc& ds_t = g.virt(io, sd_t, sd_t_strides);
  g.reshape(ds, ds_t);
  g.matmul(ds_t, q, dk);

  const Desc& k = g.virt(io, {B, H, Tk, D}, key.strides[1]);
  g.reshape(kt, k);
  if (dq_direct) {
    g.matmul(ds, k, dq);
  } else {
    const Dims dq_dims{B, H, Tq, D};
    const Desc& acc = g.tensor(kDQAccum, f32, dq_dims, contiguous(dq_dims));
    g.matmul(ds, k, acc);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, acc, nullptr, dq);
  }
}

// An execution plan and the scratch its graph names: [cuDNN's workspace | softmax_sum | dQ acc].
// The plan keeps every descriptor it was made from (the nodes, the operation graph, the
// heuristics' engine configurations), which cuDNN's documentation does not promise may go first.
struct CudnnPlan {
  Graph graph;
  Desc op_graph, heuristics;
  std::vector<Desc> configs;
  Desc plan;  // null in recording mode
  int64_t workspace = 0;
  int64_t softmax_sum_offset = 0, dq_accum_offset = 0;  // 0: the graph has no such tensor
  int64_t total_bytes = 0;
  float scale = 1.f, neg_inf = -std::numeric_limits<float>::infinity(), one = 1.f;  // by-value scalars
  bool uses_neg_inf = false, uses_one = false;  // the graph has these scalars (the mask, the row sums)
};

int64_t round_up(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

void lay_out_workspace(CudnnPlan& p, const SdpaPlanKey& key, bool dq_direct) {
  int64_t at = round_up(p.workspace);
  if (key.pass == SdpaPass::Backward) {
    const auto [B, H, Tq, Tk, D] = key.dims;
    (void)Tk;
    p.softmax_sum_offset = at;
    at += round_up(B * H * Tq * 4);
    if (!dq_direct) {
      p.dq_accum_offset = at;
      at += round_up(B * H * Tq * D * 4);
    }
  }
  p.total_bytes = at;
}

bool engine_deterministic(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, notes.size(), &n,
                               notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (notes[static_cast<size_t>(i)] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
  return true;
}

// The first engine of cuDNN's heuristics (mode A) whose execution plan finalizes (deterministic
// ones only when the key asks) for out.graph: returns "" having filled out's descriptors and
// workspace size, or why there is no plan. Errors of the library are answers here, not
// exceptions: the op then runs brisk's kernels.
std::string finalize_plan(cudnnHandle_t handle, const SdpaPlanKey& key, CudnnPlan& out) {
  const char* pass = key.pass == SdpaPass::Forward ? "forward" : "backward";
  auto no = [&](const auto&... parts) { return brisk::detail::str_cat("cuDNN attention ", pass, ": ", parts...); };
  Desc& graph = out.op_graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  const std::vector<cudnnBackendDescriptor_t> ops = out.graph.ops();
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), static_cast<int64_t>(ops.size()));
  if (const cudnnStatus_t st = cudnnBackendFinalize(graph.get()); st != CUDNN_STATUS_SUCCESS)
    return no("the operation graph (", ops.size(), " nodes) did not finalize: ", cudnnGetErrorString(st));
  Desc& heur = out.heuristics = Desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  if (const cudnnStatus_t st = cudnnBackendFinalize(heur.get()); st != CUDNN_STATUS_SUCCESS)
    return no("the heuristics did not finalize: ", cudnnGetErrorString(st));
  int64_t count = 0;
  cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                           nullptr);
  if (count <= 0) return no("cuDNN's heuristics offer no engine for this graph");
  std::vector<Desc>& cfgs = out.configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) raw.push_back(cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
  int64_t got = 0;
  if (const cudnnStatus_t st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
      st != CUDNN_STATUS_SUCCESS)
    return no("reading the heuristics' engines failed: ", cudnnGetErrorString(st));
  int64_t skipped = 0, failed = 0;
  for (int64_t i = 0; i < got; ++i) {
    const Desc& cfg = cfgs[static_cast<size_t>(i)];
    if (key.deterministic && !engine_deterministic(cfg)) {
      ++skipped;
      continue;
    }
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    int64_t n = 0, workspace = 0;
    if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 &workspace) != CUDNN_STATUS_SUCCESS) {
      ++failed;
      continue;
    }
    out.plan = std::move(plan);
    out.workspace = workspace;
    return "";
  }
  return no("none of the ", got, " engines cuDNN's heuristics offer could be used (", failed, " did not finalize, ",
            skipped, " are not deterministic and kernels::deterministic() is on)");
}

// Builds the key's graph and (on a GPU) its plan. While recording, the graph's descriptors are
// still made and finalized (host objects: cuDNN checks each node), but no handle, operation graph
// or engine is asked for.
SdpaPlanResult<CudnnPlan> build_plan(const SdpaPlanKey& key) {
  const bool dq_direct = key.deterministic;
  try {
    auto plan = std::make_shared<CudnnPlan>();
    if (key.pass == SdpaPass::Forward)
      forward_graph(plan->graph, key);
    else
      backward_graph(plan->graph, key, dq_direct);
    if (!key.recording) {
      brisk::cuda::DeviceGuard guard(key.device);
      std::string why = finalize_plan(bd::cudnn_handle(key.device, bd::current_native_stream(key.device)), key, *plan);
      if (!why.empty()) return {nullptr, std::move(why)};
    }
    plan->scale = static_cast<float>(key.scale);
    plan->uses_neg_inf = key.causal;
    plan->uses_one = key.pass == SdpaPass::Backward;
    lay_out_workspace(*plan, key, dq_direct);
    return {std::move(plan), ""};
  } catch (const Error& e) {
    return {nullptr, brisk::detail::str_cat("cuDNN attention: building the graph failed: ", e.what())};
  }
}

SdpaPlanCache<CudnnPlan>& plan_cache() {
  static auto* cache = new SdpaPlanCache<CudnnPlan>(build_plan);  // process lifetime
  return *cache;
}

std::array<int64_t, 4> strides_of(const Tensor& t) {
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

SdpaPlanKey make_key(SdpaPass pass, const Tensor& q, const Tensor& k, bool causal, double scale) {
  SdpaPlanKey key;
  key.pass = pass;
  key.device = q.device().index;
  key.dtype = q.dtype();
  key.causal = causal;
  key.deterministic = pass == SdpaPass::Backward && kernels::deterministic();
  key.recording = bd::recording();
  key.scale = scale;
  key.dims = {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  return key;
}

// Enqueues the plan with `operands` (uid, data) and the plan's own scalars and scratch. False
// (nothing enqueued) when the workspace cannot be allocated.
bool execute(const CudnnPlan& plan, int device, std::vector<std::pair<int64_t, void*>> operands, std::string* why) {
  cudaStream_t stream = bd::current_native_stream(device);
  Tensor ws;
  if (plan.total_bytes > 0) {
    ws = bd::try_workspace(device, static_cast<size_t>(plan.total_bytes));
    if (!ws.defined()) {
      if (why)
        *why = brisk::detail::str_cat("cuDNN attention: its workspace of ", plan.total_bytes,
                                      " bytes could not be allocated");
      return false;
    }
  }
  if (bd::recording_library_call("cudnnBackendExecute", stream)) return true;
  auto* base = static_cast<char*>(ws.defined() ? ws.data_ptr() : nullptr);
  operands.emplace_back(kScale, const_cast<float*>(&plan.scale));
  if (plan.uses_neg_inf) operands.emplace_back(kNegInf, const_cast<float*>(&plan.neg_inf));
  if (plan.uses_one) operands.emplace_back(kOne, const_cast<float*>(&plan.one));
  if (plan.softmax_sum_offset > 0) operands.emplace_back(kSoftmaxSum, base + plan.softmax_sum_offset);
  if (plan.dq_accum_offset > 0) operands.emplace_back(kDQAccum, base + plan.dq_accum_offset);
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [uid, p] : operands) {
    uids.push_back(uid);
    ptrs.push_back(p);
  }
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()));
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(), static_cast<int64_t>(ptrs.size()));
  void* ws_ptr = base;
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws_ptr);
  pack.finalize("cudnnBackendFinalize(variant pack)");
  BRISK_CUDNN_CHECK(cudnnBackendExecute(bd::cudnn_handle(device, stream), plan.plan.get(), pack.get()));
  return true;
}

bool run(const SdpaPlanKey& key, int device, std::vector<std::pair<int64_t, void*>> operands, std::string* why) {
  const SdpaPlanResult<CudnnPlan> r = plan_cache().get(key);
  if (!r.plan) {
    if (why) *why = r.why;
    return false;
  }
  return execute(*r.plan, device, std::move(operands), why);
}

}  // namespace

std::string cudnn_attention_device_unsupported(int device) {
  const int major = bd::compute_capability_major(device);
  if (major < 8)
    return brisk::detail::str_cat("cuDNN's fused attention needs compute capability 8.0 or newer; cuda:", device,
                                  " has ", major, ".x");
  if (!bd::recording()) {
    const auto version = static_cast<int64_t>(cudnnGetVersion());
    if (version < kMinCudnnVersion)
      return brisk::detail::str_cat("cuDNN ", version, " is loaded; its fused attention is used from 9.6 (",
                                    kMinCudnnVersion, ")");
  }
  return "";
}

bool cudnn_attention_backward_deterministic(int device) {
  return bd::compute_capability_major(device) == 9;
}

bool cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                             const Tensor& out, const Tensor& lse, std::string* why) {
  brisk::cuda::DeviceGuard guard(q.device().index);
  SdpaPlanKey key = make_key(SdpaPass::Forward, q, k, causal, scale);
  key.strides[0] = strides_of(q);
  key.strides[1] = strides_of(k);
  key.strides[2] = strides_of(v);
  key.strides[3] = strides_of(out);
  return run(
      key, key.device,
      {{kQ, q.data_ptr()}, {kK, k.data_ptr()}, {kV, v.data_ptr()}, {kO, out.data_ptr()}, {kStats, lse.data_ptr()}},
      why);
}

bool cudnn_attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, bool causal, double scale, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, std::string* why) {
  brisk::cuda::DeviceGuard guard(q.device().index);
  SdpaPlanKey key = make_key(SdpaPass::Backward, q, k, causal, scale);
  const Tensor* operands[] = {&q, &k, &v, &out, &grad, &dq, &dk, &dv};
  for (size_t i = 0; i < 8; ++i) key.strides[i] = strides_of(*operands[i]);
  return run(key, key.device,
             {{kQ, q.data_ptr()},
              {kK, k.data_ptr()},
              {kV, v.data_ptr()},
              {kO, out.data_ptr()},
              {kStats, lse.data_ptr()},
              {kDO, grad.data_ptr()},
              {kDQ, dq.data_ptr()},
              {kDK, dk.data_ptr()},
              {kDV, dv.data_ptr()}},
             why);
}

AttentionPlanStats cudnn_attention_stats() {
  return {plan_cache().misses(), plan_cache().hits()};
}

void cudnn_attention_reset_cache() {
  plan_cache().clear();
}

}  // namespace brisk::kernels::cuda
