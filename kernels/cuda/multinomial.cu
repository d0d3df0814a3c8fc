// multinomial on the GPU, drawing exactly what the CPU draws for the same seed: the per-row
// arithmetic is device/index.h's (sequential double sums in category order, Philox counter base
// + r * num_samples + s per draw), so one thread walks each row (with replacement, one thread
// per draw). Rows are validated on the device; a bad row is reported through the device-error
// slot and its samples are left at 0.
#include "brisk/kernels/device/index.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/index.h"
#include "cuda/index_common.cuh"
#include "cuda/launch.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
using common::report_bad_value;
using common::Slot;

struct RowCodes {
  int32_t bad_value, zero_total, too_few;
};

// One thread per row of w: (rows, n) f64, validates it and stores its total and last positive
// category for the draws with replacement; without replacement it also makes the row's draws,
// overwriting the row (out: (rows, num_samples), `=`).
__global__ void multinomial_rows_kernel(int64_t rows, int64_t n, int64_t num_samples, bool replacement, uint64_t seed,
                                        uint64_t base, double* __restrict__ w, double* __restrict__ totals,
                                        int64_t* __restrict__ lasts, int64_t* __restrict__ out, Slot* slot,
                                        RowCodes codes) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += step) {
    double* row = w + r * n;
    const device::MultinomialRow st = device::multinomial_row(row, n);
    bool ok = true;
    if (!st.valid) {
      report_bad_value(slot, codes.bad_value, r, rows);
      ok = false;
    } else if (!(st.total > 0)) {
      report_bad_value(slot, codes.zero_total, r, rows);
      ok = false;
    } else if (!replacement && st.nonzero < num_samples) {
      report_bad_value(slot, codes.too_few, st.nonzero, num_samples);
      ok = false;
    }
    totals[r] = ok ? st.total : 0.0;
    lasts[r] = st.last_nonzero;
    if (replacement) continue;
    int64_t* o = out + r * num_samples;
    if (!ok) {
      for (int64_t s = 0; s < num_samples; ++s) o[s] = 0;
      continue;
    }
    device::multinomial_without_replacement(row, n, num_samples, seed, base + static_cast<uint64_t>(r * num_samples),
                                            o);
  }
}

// One thread per draw (r, s) = item / num_samples, item % num_samples: out[item] = the pick for
// Philox counter base + item.
__global__ void multinomial_draws_kernel(int64_t total, int64_t n, int64_t num_samples, uint64_t seed, uint64_t base,
                                         const double* __restrict__ w, const double* __restrict__ totals,
                                         const int64_t* __restrict__ lasts, int64_t* __restrict__ out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i / num_samples;
    const double u = device::multinomial_unit(seed, base + static_cast<uint64_t>(i)) * totals[r];
    out[i] = device::multinomial_pick(w + r * n, n, u, lasts[r]);
  }
}

}  // namespace

void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, uint64_t seed, uint64_t base,
                 const Tensor& out) {
  OpScope scope("multinomial", &probs);
  static const RowCodes codes{
      rt::register_device_error("multinomial: probs must be finite and non-negative; value = a bad row, limit = rows"),
      rt::register_device_error("multinomial: a row of probs sums to zero; value = the row, limit = rows"),
      rt::register_device_error("multinomial: a row has too few nonzero categories to draw without replacement; "
                                "value = its nonzero categories, limit = num_samples"),
  };
  const int64_t rows = probs.size(0), n = probs.size(1);
  if (rows == 0) return;
  const Device dev = probs.device();
  brisk::cuda::DeviceGuard guard(dev.index);
  cudaStream_t stream = rt::current_native_stream(dev.index);
  Tensor totals = empty({rows}, DType::F64, dev), lasts = empty({rows}, DType::I64, dev);
  auto* w = static_cast<double*>(probs.data_ptr());
  auto* tp = static_cast<double*>(totals.data_ptr());
  auto* lp = static_cast<int64_t*>(lasts.data_ptr());
  auto* op = static_cast<int64_t*>(out.data_ptr());
  // Small blocks: there are few rows, and each thread runs long.
  constexpr int kRowThreads = 64;
  rt::launch("multinomial_rows", multinomial_rows_kernel, dim3(rt::blocks_for(rows, kRowThreads)), dim3(kRowThreads), 0,
             stream, rows, n, num_samples, replacement, seed, base, w, tp, lp, op, rt::device_error_slot(), codes);
  if (!replacement) return;
  const int64_t total = rows * num_samples;
  rt::launch("multinomial_draws", multinomial_draws_kernel, dim3(common::grid_for(total, dev.index)),
             dim3(common::kThreads), 0, stream, total, n, num_samples, seed, base, static_cast<const double*>(w),
             static_cast<const double*>(tp), static_cast<const int64_t*>(lp), op);
}

}  // namespace brisk::kernels::cuda
