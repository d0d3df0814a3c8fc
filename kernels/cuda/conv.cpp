// conv2d forward and backward through cuDNN 9's convolution API (cudnnConvolutionForward,
// BackwardData, BackwardFilter). Each problem (pass, device, dtype, sizes, options, math settings,
// benchmark and deterministic modes) gets a plan on its first call (brisk/kernels/conv_plan.h):
// its tensor, filter and convolution descriptors, the algorithm chosen from cuDNN's heuristics
// (cudnnGet*Algorithm_v7), or from timing them (cudnnFind*AlgorithmEx) when
// cuda::cudnn_benchmark() is on, with that algorithm's math mode set and its workspace size; every
// later call is a lookup, a workspace from the caching allocator and the execution call.
// Deterministic algorithms are preferred, and the only ones under kernels::deterministic(). Math:
// f32 may use TF32 when cuda::cudnn_allow_tf32() (PyTorch's default), f16/bf16 use tensor cores
// with f32 accumulation, f64 computes in f64. An algorithm whose workspace cannot be allocated, or
// that cuDNN reports as unsupported for the problem, is skipped for the next one. Tensors beyond
// cuDNN's 2^31-element limit are split along the batch.
#include "cuda/conv.h"

#include <limits>
#include <memory>
#include <vector>

#include "brisk/core/allocator.h"
#include "brisk/kernels/conv_plan.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/settings.h"
#include "cuda/library.h"

namespace brisk::kernels::cuda {

namespace {

namespace bd = brisk::cuda::detail;

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::F64:
      return CUDNN_DATA_DOUBLE;
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw_not_implemented("conv2d", dt, Device{DeviceKind::CUDA, 0});
  }
}

// 16-bit convolutions accumulate in f32 ("pseudo-half"), as PyTorch's.
cudnnDataType_t compute_type(DType dt) {
  return dt == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// The math the convolution descriptor starts with; cuDNN's heuristics answer within it.
cudnnMathType_t math_type(DType dt) {
  switch (dt) {
    case DType::F32:
      return brisk::cuda::cudnn_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    case DType::F16:
    case DType::BF16:
      return CUDNN_TENSOR_OP_MATH;
    default:
      return CUDNN_DEFAULT_MATH;
  }
}

int as_int(int64_t v, const char* what) {
  BRISK_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "conv2d: ", what, " ", v,
              " exceeds cuDNN's 32-bit limit ", bd::op_context());
  return static_cast<int>(v);
}

// A cuDNN call that prepares a convolution (descriptors, math mode, output size, algorithm and
// workspace queries), logged while recording (bd::recording_library_setup): a cached problem
// makes none.
#define BRISK_CONV_SETUP(fn, ...) (bd::recording_library_setup(#fn), fn(__VA_ARGS__))

// RAII owners of cuDNN descriptors (host objects: creating them needs no GPU).
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(DType dt, int64_t n, int64_t c, int64_t h, int64_t w) {
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnCreateTensorDescriptor, &d));
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetTensor4dDescriptor, d, CUDNN_TENSOR_NCHW, cudnn_type(dt),
                                       as_int(n, "batch"), as_int(c, "channels"), as_int(h, "height"),
                                       as_int(w, "width")));
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(DType dt, int64_t k, int64_t c, int64_t kh, int64_t kw) {
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnCreateFilterDescriptor, &d));
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetFilter4dDescriptor, d, cudnn_type(dt), CUDNN_TENSOR_NCHW,
                                       as_int(k, "output channels"), as_int(c, "input channels per group"),
                                       as_int(kh, "kernel height"), as_int(kw, "kernel width")));
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const Conv2dOptions& o, DType dt) {
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnCreateConvolutionDescriptor, &d));
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetConvolution2dDescriptor, d, as_int(o.padding.h, "padding"),
                                       as_int(o.padding.w, "padding"), as_int(o.stride.h, "stride"),
                                       as_int(o.stride.w, "stride"), as_int(o.dilation.h, "dilation"),
                                       as_int(o.dilation.w, "dilation"), CUDNN_CROSS_CORRELATION, compute_type(dt)));
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetConvolutionGroupCount, d, as_int(o.groups, "groups")));
    // The math the heuristics answer within (each algorithm's own is set when it is tried).
    BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetConvolutionMathType, d, math_type(dt)));
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

using Pass = ConvPass;
const char* pass_call(Pass p) {
  switch (p) {
    case Pass::Forward:
      return "cudnnConvolutionForward";
    case Pass::BackwardData:
      return "cudnnConvolutionBackwardData";
    case Pass::BackwardFilter:
      return "cudnnConvolutionBackwardFilter";
  }
  return "?";
}

using Choice = ConvAlgoCandidate;

// One convolution problem's cuDNN objects and the algorithm chosen for it: built by the first
// call for its key, then read-only and shared (cuDNN's execution calls only read descriptors).
struct ConvPlan {
  ConvPlan(const ConvPlanKey& k, const Conv2dOptions& o)
      : x(k.dtype, k.dims[0], k.dims[1], k.dims[2], k.dims[3]),
        w(k.dtype, k.dims[4], k.dims[5], k.dims[6], k.dims[7]),
        y(k.dtype, k.dims[0], k.dims[4], k.dims[8], k.dims[9]),
        conv(o, k.dtype) {}
  TensorDesc x;
  FilterDesc w;
  TensorDesc y;
  ConvDesc conv;  // its math mode is the chosen algorithm's
  Choice choice;
  size_t workspace = 0;  // bytes the chosen algorithm needs
};

ConvPlanCache<ConvPlan>& plan_cache() {
  static auto* c = new ConvPlanCache<ConvPlan>;  // process lifetime
  return *c;
}

// One convolution call: the pass, the plan whose descriptors it uses, and the pass's output size.
struct Problem {
  Pass pass;
  DType dtype;
  int device;
  const ConvPlan* plan;
  int64_t out_bytes;  // the pass's output: y, x or w
};

// x (a chunk of the batch), w and y are dense NCHW: their sizes fix the strides.
ConvPlanKey plan_key(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, int64_t len,
                     const Conv2dOptions& o) {
  ConvPlanKey k;
  k.pass = pass;
  k.device = x.device().index;
  k.dtype = x.dtype();
  k.dims = {len, x.size(1), x.size(2), x.size(3), w.size(0), w.size(1), w.size(2), w.size(3), y.size(2), y.size(3)};
  k.options = {o.stride.h, o.stride.w, o.padding.h, o.padding.w, o.dilation.h, o.dilation.w, o.groups};
  k.math = static_cast<int>(math_type(x.dtype()));
  k.benchmark = brisk::cuda::cudnn_benchmark();
  k.deterministic = kernels::deterministic();
  k.recording = bd::recording();
  return k;
}

// The operands of one call: x, w, y data (y is the output for Forward, gy otherwise; for the
// backward passes x or w is the output).
struct Buffers {
  void* x;
  void* w;
  void* y;
};

// Candidate algorithms, best first (rank_conv_algorithms: deterministic ones first, the others
// only when kernels::deterministic() is off).
template <class Perf>
std::vector<Choice> rank(const Perf* perf, int count) {
  std::vector<Choice> reported;
  for (int i = 0; i < count; ++i)
    reported.push_back({static_cast<int>(perf[i].algo), static_cast<int>(perf[i].mathType), perf[i].memory,
                        perf[i].status == CUDNN_STATUS_SUCCESS, perf[i].determinism == CUDNN_DETERMINISTIC});
  return rank_conv_algorithms(reported, kernels::deterministic());
}

size_t workspace_size(cudnnHandle_t h, const Problem& p, int algo) {
  const ConvPlan& d = *p.plan;
  size_t bytes = 0;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  switch (p.pass) {
    case Pass::Forward:
      st = BRISK_CONV_SETUP(cudnnGetConvolutionForwardWorkspaceSize, h, d.x.d, d.w.d, d.conv.d, d.y.d,
                            static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case Pass::BackwardData:
      st = BRISK_CONV_SETUP(cudnnGetConvolutionBackwardDataWorkspaceSize, h, d.w.d, d.y.d, d.conv.d, d.x.d,
                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case Pass::BackwardFilter:
      st = BRISK_CONV_SETUP(cudnnGetConvolutionBackwardFilterWorkspaceSize, h, d.x.d, d.y.d, d.conv.d, d.w.d,
                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return st == CUDNN_STATUS_SUCCESS ? bytes : std::numeric_limits<size_t>::max();
}

// Times every algorithm (cudnnFind*Ex, which runs them on the real inputs) with the largest
// workspace that any needs and that can be allocated. The timing runs write the output, so an
// output that already holds values to accumulate onto gets a scratch copy instead.
std::vector<Choice> find_algorithms(cudnnHandle_t h, const Problem& p, Buffers b, bool accumulate) {
  const ConvPlan& d = *p.plan;
  Tensor scratch;
  if (accumulate) {
    MemoryCategoryGuard category(MemoryCategory::Other);
    scratch = empty({p.out_bytes}, DType::U8, cuda_device(p.device));
    (p.pass == Pass::Forward ? b.y : p.pass == Pass::BackwardData ? b.x : b.w) = scratch.data_ptr();
  }
  constexpr int kMax = 16;
  const int n_algos = p.pass == Pass::Forward        ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
                      : p.pass == Pass::BackwardData ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
                                                     : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  size_t want = 0;
  for (int a = 0; a < n_algos; ++a) {
    const size_t s = workspace_size(h, p, a);
    if (s < (size_t{1} << 30)) want = std::max(want, s);  // at most 1 GiB for the search
  }
  Tensor ws;
  while (want > 0 && !(ws = bd::try_workspace(p.device, want)).defined()) want /= 2;
  void* wp = ws.defined() ? ws.data_ptr() : nullptr;
  const size_t wb = ws.defined() ? ws.nbytes() : 0;
  int count = 0;
  switch (p.pass) {
    case Pass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnFindConvolutionForwardAlgorithmEx, h, d.x.d, b.x, d.w.d, b.w, d.conv.d,
                                         d.y.d, b.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf, wp, wb));
      return rank(perf, count);
    }
    case Pass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnFindConvolutionBackwardDataAlgorithmEx, h, d.w.d, b.w, d.y.d, b.y,
                                         d.conv.d, d.x.d, b.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf, wp,
                                         wb));
      return rank(perf, count);
    }
    case Pass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnFindConvolutionBackwardFilterAlgorithmEx, h, d.x.d, b.x, d.y.d, b.y,
                                         d.conv.d, d.w.d, b.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf,
                                         wp, wb));
      return rank(perf, count);
    }
  }
  return {};
}

std::vector<Choice> heuristic_algorithms(cudnnHandle_t h, const Problem& p) {
  const ConvPlan& d = *p.plan;
  constexpr int kMax = 16;
  int count = 0;
  switch (p.pass) {
    case Pass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnGetConvolutionForwardAlgorithm_v7, h, d.x.d, d.w.d, d.conv.d, d.y.d,
                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
    case Pass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnGetConvolutionBackwardDataAlgorithm_v7, h, d.w.d, d.y.d, d.conv.d, d.x.d,
                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
    case Pass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnGetConvolutionBackwardFilterAlgorithm_v7, h, d.x.d, d.y.d, d.conv.d,
                                         d.w.d, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
  }
  return {};
}

// Runs one algorithm with the math mode the convolution descriptor holds; returns its status
// (the caller decides what a failure means).
cudnnStatus_t run_algorithm(cudnnHandle_t h, const Problem& p, const Buffers& b, int algo, void* ws, size_t ws_bytes,
                            bool accumulate) {
  const ConvPlan& d = *p.plan;
  // Scaling factors are double for double data, float otherwise.
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = p.dtype == DType::F64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = accumulate ? alpha : (f64 ? static_cast<const void*>(&zero64) : &zero32);
  switch (p.pass) {
    case Pass::Forward:
      return cudnnConvolutionForward(h, alpha, d.x.d, b.x, d.w.d, b.w, d.conv.d,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, ws_bytes, beta, d.y.d, b.y);
    case Pass::BackwardData:
      return cudnnConvolutionBackwardData(h, alpha, d.w.d, b.w, d.y.d, b.y, d.conv.d,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, ws_bytes, beta, d.x.d,
                                          b.x);
    case Pass::BackwardFilter:
      return cudnnConvolutionBackwardFilter(h, alpha, d.x.d, b.x, d.y.d, b.y, d.conv.d,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, ws_bytes, beta,
                                            d.w.d, b.w);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// What a run of an algorithm came to: done, or skipped (workspace not to be had, or cuDNN says
// the algorithm does not support the problem; nothing was enqueued); any other failure throws.
bool ran(cudnnStatus_t st, const Problem& p, cudnnStatus_t* last) {
  if (st == CUDNN_STATUS_SUCCESS) return true;
  if (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) {
    if (last) *last = st;
    return false;
  }
  bd::throw_cudnn_error(st, pass_call(p.pass), __FILE__, __LINE__);
}

// Tries candidate `c` on the plan being built: sets its math mode on the convolution descriptor,
// allocates its workspace and runs it. On success the plan keeps c and the workspace size.
bool try_choice(cudnnHandle_t h, const Problem& p, ConvPlan& plan, const Buffers& b, Choice c, bool accumulate,
                cudnnStatus_t* last) {
  // f32 without TF32 must never run on tensor cores, whatever math an algorithm was listed with.
  if (p.dtype == DType::F32 && !brisk::cuda::cudnn_allow_tf32()) c.math = CUDNN_FMA_MATH;
  BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetConvolutionMathType, plan.conv.d, static_cast<cudnnMathType_t>(c.math)));
  const size_t need = std::max(c.memory, workspace_size(h, p, c.algo));
  if (need == std::numeric_limits<size_t>::max()) return false;
  Tensor ws = bd::try_workspace(p.device, need);
  if (need > 0 && !ws.defined()) return false;
  if (!ran(run_algorithm(h, p, b, c.algo, ws.defined() ? ws.data_ptr() : nullptr, need, accumulate), p, last))
    return false;
  plan.choice = c;
  plan.workspace = need;
  return true;
}

// Recording mode has no handle to ask cuDNN's heuristics with: the query is logged and a
// deterministic algorithm of the pass stands in (implicit GEMM forward, ALGO_1 backward).
void choose_while_recording(const ConvPlanKey& key, const Problem& p, ConvPlan& plan) {
  bd::recording_library_setup(key.benchmark                  ? "cudnnFindConvolution*AlgorithmEx"
                              : p.pass == Pass::Forward      ? "cudnnGetConvolutionForwardAlgorithm_v7"
                              : p.pass == Pass::BackwardData ? "cudnnGetConvolutionBackwardDataAlgorithm_v7"
                                                             : "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  plan.choice = {.algo = p.pass == Pass::Forward ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM) : 1,
                 .math = key.math,
                 .memory = 0,
                 .ok = true,
                 .deterministic = true};
  BRISK_CUDNN_CHECK(BRISK_CONV_SETUP(cudnnSetConvolutionMathType, plan.conv.d, math_type(p.dtype)));
  bd::recording_library_call(pass_call(p.pass), bd::current_native_stream(p.device));
}

// The first call of a problem: cuDNN's output size checked against ours, then the candidates
// (from the heuristics, or timed) run in turn on the call's buffers until one can, which the plan
// keeps. The call's work is done when this returns.
void choose_and_run(const ConvPlanKey& key, const Problem& p, ConvPlan& plan, const Buffers& b, bool accumulate) {
  // A host-side check that also runs while recording.
  int on = 0, oc = 0, oh = 0, ow = 0;
  BRISK_CUDNN_CHECK(
      BRISK_CONV_SETUP(cudnnGetConvolution2dForwardOutputDim, plan.conv.d, plan.x.d, plan.w.d, &on, &oc, &oh, &ow));
  BRISK_CHECK(on == key.dims[0] && oc == key.dims[4] && oh == key.dims[8] && ow == key.dims[9],
              "conv2d: internal error: cuDNN computes output [", on, ", ", oc, ", ", oh, ", ", ow, "] for [",
              key.dims[0], ", ", key.dims[4], ", ", key.dims[8], ", ", key.dims[9], "] ", bd::op_context());
  if (key.recording) return choose_while_recording(key, p, plan);
  cudnnHandle_t h = bd::cudnn_handle(p.device, bd::current_native_stream(p.device));
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  const std::vector<Choice> candidates =
      key.benchmark ? find_algorithms(h, p, b, accumulate) : heuristic_algorithms(h, p);
  for (const Choice& c : candidates)
    if (try_choice(h, p, plan, b, c, accumulate, &last)) return;
  // Deterministic mode kept only cuDNN's deterministic algorithms, and none of them could run.
  kernels::check_nondeterministic_allowed(
      pass_call(p.pass), brisk::detail::str_cat("cuDNN has no deterministic algorithm that runs for this convolution (",
                                                candidates.size(), " deterministic candidates failed)"));
  bd::throw_cudnn_error(
      last,
      brisk::detail::str_cat(pass_call(p.pass), " (no algorithm of ", candidates.size(), " candidates could run)")
          .c_str(),
      __FILE__, __LINE__);
}

// A call whose plan is cached: its workspace from the caching allocator and the execution call,
// no other cuDNN call. False (nothing enqueued) when the workspace cannot be had or cuDNN no
// longer runs the algorithm; the caller then builds the plan again.
bool execute(const Problem& p, const Buffers& b, bool accumulate) {
  const ConvPlan& plan = *p.plan;
  Tensor ws = bd::try_workspace(p.device, plan.workspace);
  if (plan.workspace > 0 && !ws.defined()) return false;
  cudaStream_t stream = bd::current_native_stream(p.device);
  if (bd::recording_library_call(pass_call(p.pass), stream)) return true;
  cudnnHandle_t h = bd::cudnn_handle(p.device, stream);
  return ran(
      run_algorithm(h, p, b, plan.choice.algo, ws.defined() ? ws.data_ptr() : nullptr, plan.workspace, accumulate), p,
      nullptr);
}

// Runs one call: the cached plan for its key, or a new one built (and cached) by running it.
void run(const ConvPlanKey& key, const Conv2dOptions& o, Problem p, const Buffers& b, bool accumulate) {
  if (std::shared_ptr<const ConvPlan> cached = plan_cache().find(key)) {
    p.plan = cached.get();
    if (execute(p, b, accumulate)) return;
  }
  auto plan = std::make_shared<ConvPlan>(key, o);
  p.plan = plan.get();
  choose_and_run(key, p, *plan, b, accumulate);
  plan_cache().insert(key, std::move(plan));
}

// A contiguous tensor at an address aligned for vector loads (a copy only when t is not).
Tensor dense(const Tensor& t) {
  if (!t.is_contiguous()) return kernels::contiguous(t);
  if (bd::pointer_alignment(t.data_ptr()) < 16) return kernels::cast(t, t.dtype());
  return t;
}

// Samples [start, start + len) of an (N, ...) tensor, as a view (kernels/ cannot use
// Tensor::narrow, which lives in autograd).
Tensor batch_slice(const Tensor& t, int64_t start, int64_t len) {
  Shape sizes = t.sizes();
  sizes[0] = len;
  return t.as_strided(sizes, t.strides(), t.offset() + start * t.stride(0));
}

// Samples per cuDNN call so that no tensor of a call passes 2^31 - 1 elements.
int64_t batch_chunk(int64_t n, int64_t per_sample) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  BRISK_CHECK(per_sample <= kMax, "conv2d: one sample has ", per_sample,
              " elements, more than cuDNN's 2^31 - 1 per tensor ", bd::op_context());
  return std::max<int64_t>(1, std::min(n, kMax / std::max<int64_t>(per_sample, 1)));
}

// Runs `pass` over the batch in chunks. x, y: (N, ...) contiguous; w: the filter (whole).
// accumulate: add onto what the output holds (beta = 1), in f32 before the output's one rounding.
void run_pass(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& o, bool accumulate) {
  const int64_t n = x.size(0);
  const int64_t per_sample = std::max(x.numel() / std::max<int64_t>(n, 1), y.numel() / std::max<int64_t>(n, 1));
  const int64_t chunk = batch_chunk(n, per_sample);
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const Tensor xs = batch_slice(x, start, len), ys = batch_slice(y, start, len);
    const Problem p{pass, x.dtype(), x.device().index, nullptr,
                    static_cast<int64_t>(pass == Pass::Forward        ? ys.nbytes()
                                         : pass == Pass::BackwardData ? xs.nbytes()
                                                                      : w.nbytes())};
    // The filter gradient of later chunks adds onto the earlier ones'.
    run(plan_key(pass, xs, w, ys, len, o), o, p, Buffers{xs.data_ptr(), w.data_ptr(), ys.data_ptr()},
        accumulate || (pass == Pass::BackwardFilter && start > 0));
  }
}

}  // namespace

void conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b, const Conv2dOptions& o, const Tensor& y) {
  OpScope scope("conv2d", &x_in, &w_in, &b);
  if (y.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(y.device().index);
  // The bias is loaded first and the convolution added onto it (beta = 1): cuDNN sums in f32,
  // so a 16-bit output is rounded once, as on the CPU (adding the bias afterwards rounds twice).
  if (b.defined())
    copy_(y, b.as_strided(y.sizes(), {0, b.stride(0), 0, 0}, b.offset()));
  else if (x_in.numel() == 0 || w_in.numel() == 0)
    fill_(y, 0.0);
  if (x_in.numel() > 0 && w_in.numel() > 0) run_pass(Pass::Forward, dense(x_in), dense(w_in), y, o, b.defined());
}

void conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, const Conv2dOptions& o,
                     const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  OpScope scope("conv2d_backward", &gy_in, &x_in, &w_in);
  brisk::cuda::DeviceGuard guard(x_in.device().index);
  // Sums over nothing are zeros: no samples, no output pixels or channels, no input channels.
  const bool empty_product = gy_in.numel() == 0 || x_in.numel() == 0 || w_in.numel() == 0;
  const Tensor gy = dense(gy_in);
  if (gx.defined() && gx.numel() > 0) {
    if (empty_product)
      fill_(gx, 0.0);
    else
      run_pass(Pass::BackwardData, gx, dense(w_in), gy, o, false);
  }
  if (gw.defined() && gw.numel() > 0) {
    if (empty_product)
      fill_(gw, 0.0);
    else
      run_pass(Pass::BackwardFilter, dense(x_in), gw, gy, o, false);
  }
  if (gb.defined() && gb.numel() > 0) detail::channel_sums(gy, gb);
}

ConvPlanStats cudnn_conv_plan_stats() {
  return plan_cache().stats();
}

void cudnn_conv_clear_plans(int device) {
  plan_cache().clear(device);
}

}  // namespace brisk::kernels::cuda
