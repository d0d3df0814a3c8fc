// conv2d forward and backward through cuDNN 9's convolution API (cudnnConvolutionForward,
// BackwardData, BackwardFilter). Algorithms come from cuDNN's heuristics
// (cudnnGet*Algorithm_v7), or from timing them (cudnnFind*AlgorithmEx) when
// cuda::cudnn_benchmark() is on; deterministic algorithms are preferred, and the choice is cached
// per (pass, device, shapes, dtype, options, math settings). Math: f32 may use TF32 when
// cuda::cudnn_allow_tf32() (PyTorch's default), f16/bf16 use tensor cores with f32
// accumulation, f64 computes in f64. Workspaces come from the caching allocator; an algorithm
// whose workspace cannot be allocated, or that cuDNN reports as unsupported for the problem, is
// skipped for the next one. Tensors beyond cuDNN's 2^31-element limit are split along the batch.
#include "cuda/conv.h"

#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "brisk/core/allocator.h"
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

// RAII owners of cuDNN descriptors (host objects: creating them needs no GPU).
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(DType dt, int64_t n, int64_t c, int64_t h, int64_t w) {
    BRISK_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    BRISK_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, cudnn_type(dt), as_int(n, "batch"),
                                                 as_int(c, "channels"), as_int(h, "height"), as_int(w, "width")));
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  explicit FilterDesc(const Tensor& w) {
    BRISK_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d));
    BRISK_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(d, cudnn_type(w.dtype()), CUDNN_TENSOR_NCHW, as_int(w.size(0), "output channels"),
                                   as_int(w.size(1), "input channels per group"), as_int(w.size(2), "kernel height"),
                                   as_int(w.size(3), "kernel width")));
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const Conv2dOptions& o, DType dt) {
    BRISK_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    BRISK_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d, as_int(o.padding.h, "padding"), as_int(o.padding.w, "padding"), as_int(o.stride.h, "stride"),
        as_int(o.stride.w, "stride"), as_int(o.dilation.h, "dilation"), as_int(o.dilation.w, "dilation"),
        CUDNN_CROSS_CORRELATION, compute_type(dt)));
    BRISK_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, as_int(o.groups, "groups")));
    BRISK_CUDNN_CHECK(cudnnSetConvolutionMathType(d, math_type(dt)));
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

enum class Pass : int { Forward, BackwardData, BackwardFilter };
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

// One convolution problem: descriptors of x (a chunk of the batch), w, y, and the convolution.
struct Problem {
  Pass pass;
  DType dtype;
  int device;
  const Conv2dOptions* o;
  const TensorDesc* xd;
  const FilterDesc* wd;
  const TensorDesc* yd;
  const ConvDesc* cd;
  std::array<int64_t, 10> dims;  // x (n, c, h, w), w (k, c/g, kh, kw), y (oh, ow)
  int64_t out_bytes;             // the pass's output: y, x or w
};

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t memory = 0;
};

using CacheKey = std::array<int64_t, 24>;

CacheKey cache_key(const Problem& p) {
  CacheKey k{};
  size_t i = 0;
  k[i++] = static_cast<int64_t>(p.pass);
  k[i++] = p.device;
  k[i++] = static_cast<int64_t>(p.dtype);
  for (int64_t d : p.dims) k[i++] = d;
  for (int64_t v :
       {p.o->stride.h, p.o->stride.w, p.o->padding.h, p.o->padding.w, p.o->dilation.h, p.o->dilation.w, p.o->groups})
    k[i++] = v;
  k[i++] = static_cast<int64_t>(math_type(p.dtype));
  k[i++] = brisk::cuda::cudnn_benchmark() ? 1 : 0;
  k[i++] = kernels::deterministic() ? 1 : 0;
  return k;
}

struct AlgoCache {
  std::mutex mu;
  std::map<CacheKey, Choice> map;
};
AlgoCache& algo_cache() {
  static auto* c = new AlgoCache;  // process lifetime
  return *c;
}

// The operands of one call: x, w, y data (y is the output for Forward, gy otherwise; for the
// backward passes x or w is the output).
struct Buffers {
  void* x;
  void* w;
  void* y;
};

// Candidate algorithms, best first: deterministic ones first (brisk's kernels give the same
// result on every run), then, only when kernels::deterministic() is off, any others cuDNN can run.
template <class Perf>
std::vector<Choice> rank(const Perf* perf, int count) {
  std::vector<Choice> det, rest;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    const Choice c{static_cast<int>(perf[i].algo), perf[i].mathType, perf[i].memory};
    (perf[i].determinism == CUDNN_DETERMINISTIC ? det : rest).push_back(c);
  }
  if (!kernels::deterministic()) det.insert(det.end(), rest.begin(), rest.end());
  return det;
}

size_t workspace_size(cudnnHandle_t h, const Problem& p, int algo) {
  size_t bytes = 0;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  switch (p.pass) {
    case Pass::Forward:
      st = cudnnGetConvolutionForwardWorkspaceSize(h, p.xd->d, p.wd->d, p.cd->d, p.yd->d,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case Pass::BackwardData:
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.wd->d, p.yd->d, p.cd->d, p.xd->d,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case Pass::BackwardFilter:
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.xd->d, p.yd->d, p.cd->d, p.wd->d,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return st == CUDNN_STATUS_SUCCESS ? bytes : std::numeric_limits<size_t>::max();
}

// Times every algorithm (cudnnFind*Ex, which runs them on the real inputs) with the largest
// workspace that any needs and that can be allocated. The timing runs write the output, so an
// output that already holds values to accumulate onto gets a scratch copy instead.
std::vector<Choice> find_algorithms(cudnnHandle_t h, const Problem& p, Buffers b, bool accumulate) {
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
      BRISK_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, p.xd->d, b.x, p.wd->d, b.w, p.cd->d, p.yd->d, b.y,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf, wp, wb));
      return rank(perf, count);
    }
    case Pass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.wd->d, b.w, p.yd->d, b.y, p.cd->d, p.xd->d,
                                                                    b.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count,
                                                                    perf, wp, wb));
      return rank(perf, count);
    }
    case Pass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.xd->d, b.x, p.yd->d, b.y, p.cd->d, p.wd->d,
                                                                      b.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                      &count, perf, wp, wb));
      return rank(perf, count);
    }
  }
  return {};
}

std::vector<Choice> heuristic_algorithms(cudnnHandle_t h, const Problem& p) {
  constexpr int kMax = 16;
  int count = 0;
  switch (p.pass) {
    case Pass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.xd->d, p.wd->d, p.cd->d, p.yd->d,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
    case Pass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          h, p.wd->d, p.yd->d, p.cd->d, p.xd->d, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
    case Pass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      BRISK_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          h, p.xd->d, p.yd->d, p.cd->d, p.wd->d, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
      return rank(perf, count);
    }
  }
  return {};
}

// Runs one algorithm; returns its status (the caller decides what a failure means).
cudnnStatus_t run_algorithm(cudnnHandle_t h, const Problem& p, const Buffers& b, const Choice& c, void* ws,
                            size_t ws_bytes, bool accumulate) {
  cudnnStatus_t st = cudnnSetConvolutionMathType(p.cd->d, c.math);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  // Scaling factors are double for double data, float otherwise.
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = p.dtype == DType::F64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = accumulate ? alpha : (f64 ? static_cast<const void*>(&zero64) : &zero32);
  switch (p.pass) {
    case Pass::Forward:
      return cudnnConvolutionForward(h, alpha, p.xd->d, b.x, p.wd->d, b.w, p.cd->d,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, ws_bytes, beta, p.yd->d, b.y);
    case Pass::BackwardData:
      return cudnnConvolutionBackwardData(h, alpha, p.wd->d, b.w, p.yd->d, b.y, p.cd->d,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, ws_bytes, beta,
                                          p.xd->d, b.x);
    case Pass::BackwardFilter:
      return cudnnConvolutionBackwardFilter(h, alpha, p.xd->d, b.x, p.yd->d, b.y, p.cd->d,
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, ws_bytes, beta,
                                            p.wd->d, b.w);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// Tries `c`: allocates its workspace and runs it. False when the workspace cannot be had or cuDNN
// says the algorithm does not support the problem (nothing was enqueued then); throws otherwise.
bool try_choice(cudnnHandle_t h, const Problem& p, const Buffers& b, Choice c, bool accumulate, cudnnStatus_t* last) {
  // f32 without TF32 must never run on tensor cores, whatever math an algorithm was listed with.
  if (p.dtype == DType::F32 && !brisk::cuda::cudnn_allow_tf32()) c.math = CUDNN_FMA_MATH;
  BRISK_CUDNN_CHECK(cudnnSetConvolutionMathType(p.cd->d, c.math));
  const size_t need = std::max(c.memory, workspace_size(h, p, c.algo));
  if (need == std::numeric_limits<size_t>::max()) return false;
  Tensor ws = bd::try_workspace(p.device, need);
  if (need > 0 && !ws.defined()) return false;
  const cudnnStatus_t st = run_algorithm(h, p, b, c, ws.defined() ? ws.data_ptr() : nullptr, need, accumulate);
  if (st == CUDNN_STATUS_SUCCESS) return true;
  if (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) {
    *last = st;
    return false;
  }
  bd::throw_cudnn_error(st, pass_call(p.pass), __FILE__, __LINE__);
}

// Runs problem p: the cached algorithm if there is one, else the candidates in order.
void run(const Problem& p, const Buffers& b, bool accumulate) {
  if (bd::recording_library_call(pass_call(p.pass), bd::current_native_stream(p.device))) return;
  cudnnHandle_t h = bd::cudnn_handle(p.device, bd::current_native_stream(p.device));
  const CacheKey key = cache_key(p);
  AlgoCache& cache = algo_cache();
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  {
    std::optional<Choice> cached;
    {
      std::lock_guard lk(cache.mu);
      auto it = cache.map.find(key);
      if (it != cache.map.end()) cached = it->second;
    }
    if (cached && try_choice(h, p, b, *cached, accumulate, &last)) return;
  }
  // The heuristics answer within the descriptor's math type: start from the dtype's again.
  BRISK_CUDNN_CHECK(cudnnSetConvolutionMathType(p.cd->d, math_type(p.dtype)));
  const std::vector<Choice> candidates =
      brisk::cuda::cudnn_benchmark() ? find_algorithms(h, p, b, accumulate) : heuristic_algorithms(h, p);
  for (const Choice& c : candidates) {
    if (try_choice(h, p, b, c, accumulate, &last)) {
      std::lock_guard lk(cache.mu);
      cache.map[key] = c;
      return;
    }
  }
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
  const FilterDesc wd(w);
  const ConvDesc cd(o, x.dtype());
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const Tensor xs = batch_slice(x, start, len), ys = batch_slice(y, start, len);
    const TensorDesc xd(x.dtype(), len, x.size(1), x.size(2), x.size(3));
    const TensorDesc yd(y.dtype(), len, y.size(1), y.size(2), y.size(3));
    // cuDNN's own output size must be ours (a host-side check that also runs while recording).
    int on = 0, oc = 0, oh = 0, ow = 0;
    BRISK_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(cd.d, xd.d, wd.d, &on, &oc, &oh, &ow));
    BRISK_CHECK(on == len && oc == y.size(1) && oh == y.size(2) && ow == y.size(3),
                "conv2d: internal error: cuDNN computes output [", on, ", ", oc, ", ", oh, ", ", ow, "] for ",
                y.sizes(), " ", bd::op_context());
    Problem p{pass,
              x.dtype(),
              x.device().index,
              &o,
              &xd,
              &wd,
              &yd,
              &cd,
              {len, x.size(1), x.size(2), x.size(3), w.size(0), w.size(1), w.size(2), w.size(3), y.size(2), y.size(3)},
              static_cast<int64_t>(pass == Pass::Forward        ? ys.nbytes()
                                   : pass == Pass::BackwardData ? xs.nbytes()
                                                                : w.nbytes())};
    // The filter gradient of later chunks adds onto the earlier ones'.
    run(p, Buffers{xs.data_ptr(), w.data_ptr(), ys.data_ptr()},
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

}  // namespace brisk::kernels::cuda
