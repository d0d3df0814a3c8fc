// The device code of fused attention (internal; cuda/attention.cu launches it): tiles, fragment
// helpers and kernels. A header so that tests/cuda/test_attention_emulation.cpp can also compile
// it for the host, with BRISK_ATTENTION_HOST_EMULATION defined and a host stand-in for threads,
// barriers, shuffles and mma.sync (tests/cuda/attention_emulation.h), and check the kernels'
// indexing, masking and online softmax against the CPU on a machine without a GPU.
#pragma once
#if !defined(BRISK_ATTENTION_HOST_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "brisk/core/half.h"
#include "brisk/kernels/device/convert.h"

// nvcc's #pragma unroll, left out where the host compiles this header (the emulation test).
#if defined(BRISK_ATTENTION_HOST_EMULATION)
#define BRISK_ATTENTION_UNROLL
#else
#define BRISK_ATTENTION_UNROLL _Pragma("unroll")
#endif

namespace brisk::kernels::cuda::attention_detail {

constexpr int kTile = 64;              // queries per CTA (forward, dQ), keys per CTA (dK, dV), keys/queries per step
constexpr int kWarps = kTile / 16;     // each warp owns 16 rows
constexpr int kThreads = kWarps * 32;  // 128
constexpr int kPad = 8;                // elements added to each shared row: 16-byte aligned rows, spread banks
constexpr int kTileLd = kTile + kPad;  // row stride of transposed tiles (D rows of kTile)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFull = 0xffffffffu;

// One (B, H, T, D) operand: element strides of b, h and t (d is contiguous).
struct View {
  const void* p;
  int64_t sb, sh, st;
};

// One (B, H, T, D) output the same way. brisk allocates them in (B, T, H, D) memory (see
// kernels/src/attention.cpp), so a row's D elements are contiguous either way.
struct OutView {
  void* p;
  int64_t sb, sh, st;
};

struct Args {
  View q, k, v, o, g;  // o: the forward's output; g: its gradient (backward only)
  OutView out;         // forward: O; dQ kernel: dQ; dK/dV kernel: dK
  OutView out2;        // dK/dV kernel: dV
  float* lse;          // (B * H, tq)
  float* delta;        // (B * H, tq)
  int64_t batch_heads, heads, tq, tk;
  float scale, scale_log2;  // scale, and scale * log2(e) (scores in log2 units)
};

template <class E = uint16_t>
__device__ inline const E* head_ptr(const View& v, int64_t bh, int64_t heads) {
  return static_cast<const E*>(v.p) + (bh / heads) * v.sb + (bh % heads) * v.sh;
}
template <class E = uint16_t>
__device__ inline E* head_ptr(const OutView& v, int64_t bh, int64_t heads) {
  return static_cast<E*>(v.p) + (bh / heads) * v.sb + (bh % heads) * v.sh;
}

#if defined(BRISK_ATTENTION_HOST_EMULATION)
// Host stand-ins (tests/cuda/attention_emulation.h): the block's dynamic shared memory and a
// warp's mma.sync, computed from all 32 lanes' fragments with the layouts above.
using emulation::dynamic_smem;

template <class T>
inline uint32_t pack(float lo, float hi) {
  return static_cast<uint32_t>(kernels::device::from_acc<T>(lo).bits) |
         (static_cast<uint32_t>(kernels::device::from_acc<T>(hi).bits) << 16);
}

template <class T>
inline void mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  emulation::mma_m16n8k16<T>(c, a, b);
}
#else
__device__ inline uint4* dynamic_smem() {
  extern __shared__ uint4 attention_smem_words[];
  return attention_smem_words;
}

// Two floats as one register of two 16-bit values, lo in the low half (the lower column).
template <class T>
__device__ inline uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// c += a * b (16 x 8 x 16, f32 accumulators).
template <class T>
__device__ inline void mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}
#endif

__device__ inline uint32_t ld32(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// The A fragment of the 16 x 16 block at (r0, c0) of a row-major shared matrix (row stride ld).
__device__ inline void load_a(uint32_t a[4], const uint16_t* s, int ld, int r0, int c0, int lane) {
  const int g = lane >> 2, t = (lane & 3) * 2;
  a[0] = ld32(s + (r0 + g) * ld + c0 + t);
  a[1] = ld32(s + (r0 + g + 8) * ld + c0 + t);
  a[2] = ld32(s + (r0 + g) * ld + c0 + t + 8);
  a[3] = ld32(s + (r0 + g + 8) * ld + c0 + t + 8);
}

// The B fragment (k0..k0+15, n0..n0+7) of B, from a shared matrix holding B^T row-major: s[n][k].
__device__ inline void load_b(uint32_t b[2], const uint16_t* s, int ld, int n0, int k0, int lane) {
  const int g = lane >> 2, t = (lane & 3) * 2;
  b[0] = ld32(s + (n0 + g) * ld + k0 + t);
  b[1] = ld32(s + (n0 + g) * ld + k0 + t + 8);
}

// The C tiles c[2j], c[2j + 1] (16 rows, columns 16j..16j+15) as an A fragment, rounded to T.
template <class T>
__device__ inline void c_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = pack<T>(c0[0], c0[1]);
  a[1] = pack<T>(c0[2], c0[3]);
  a[2] = pack<T>(c1[0], c1[1]);
  a[3] = pack<T>(c1[2], c1[3]);
}

// Rows [row0, row0 + kTile) of a (rows, D) slice (row stride st) into s[r][c] (row stride D +
// kPad); rows past `rows` are zeros (so they add nothing and never bring NaN from stale memory).
template <int D>
__device__ inline void stage_rows(uint16_t* s, const uint16_t* src, int64_t st, int64_t row0, int64_t rows) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kTile * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * st + c);
    *reinterpret_cast<uint4*>(s + r * (D + kPad) + c) = v;
  }
}

// The same tile transposed: s[c][r] (row stride kTileLd).
template <int D>
__device__ inline void stage_rows_t(uint16_t* s, const uint16_t* src, int64_t st, int64_t row0, int64_t rows) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kTile * kChunks; i += kThreads) {
    const int r = i % kTile, c = (i / kTile) * 8;  // consecutive threads: consecutive rows (spread the stores)
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * st + c);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};  // element j: the low (even j) or high half of word j / 2
    BRISK_ATTENTION_UNROLL
    for (int j = 0; j < 8; ++j) s[(c + j) * kTileLd + r] = static_cast<uint16_t>(w[j / 2] >> (16 * (j & 1)));
  }
}

__device__ inline int64_t ceil_tiles(int64_t n) {
  return (n + kTile - 1) / kTile;
}

template <int D>
constexpr size_t forward_smem_bytes() {
  return sizeof(uint16_t) * (2 * kTile * (D + kPad) + D * kTileLd);
}

// Zeroes a warp's accumulator of N fragments of 16 x 8 (4 floats a lane each).
template <int N>
__device__ inline void zero_fragments(float (&c)[N][4]) {
  BRISK_ATTENTION_UNROLL
  for (int n = 0; n < N; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
}

// c (16 x D) += P B, P this warp's 16 x kTile accumulator (rounded to T, as the tensor cores take
// it), B the tile's (kTile, D) given transposed in `bt` (D rows of kTile, row stride kTileLd).
template <class T, int D>
__device__ inline void mma_pb(float (&c)[D / 8][4], const float (&p)[kTile / 8][4], const uint16_t* bt, int lane) {
  BRISK_ATTENTION_UNROLL
  for (int kc = 0; kc < kTile / 16; ++kc) {
    uint32_t pa[4];
    c_to_a<T>(pa, p[2 * kc], p[2 * kc + 1]);
    BRISK_ATTENTION_UNROLL
    for (int d = 0; d < D / 8; ++d) {
      uint32_t b[2];
      load_b(b, bt, kTileLd, d * 8, kc * 16, lane);
      mma<T>(c[d], pa, b);
    }
  }
}

// grid (B * H, query tiles), the largest tile index first (the causal tiles with the most keys
// start first). Dynamic shared memory: forward_smem_bytes<D>().
template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(const Args a) {
  static_assert(D % 16 == 0 && D <= 128, "attention: head dim must be a multiple of 16, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = D + kPad;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* ks = qs + kTile * kLd;
  uint16_t* vt = ks + kTile * kLd;  // V^T: (D, kTile)
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int64_t bh = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t q0 = tile * kTile;
  const uint16_t* q = head_ptr(a.q, bh, a.heads);
  const uint16_t* k = head_ptr(a.k, bh, a.heads);
  const uint16_t* v = head_ptr(a.v, bh, a.heads);

  stage_rows<D>(qs, q, a.q.st, q0, a.tq);
  __syncthreads();
  uint32_t qa[D / 16][4];  // this warp's 16 queries, kept in registers for every key tile
  BRISK_ATTENTION_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) load_a(qa[kk], qs, kLd, warp * 16, kk * 16, lane);

  float o[D / 8][4];
  zero_fragments(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int64_t rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int64_t key_tiles = ceil_tiles(a.tk);
  if (Causal)
    key_tiles = key_tiles < tile + 1 ? key_tiles : tile + 1;  // causal: tq == tk, so key tile j > tile is all future

  for (int64_t j = 0; j < key_tiles; ++j) {
    const int64_t k0 = j * kTile;
    __syncthreads();  // every warp is done with the previous K and V
    stage_rows<D>(ks, k, a.k.st, k0, a.tk);
    stage_rows_t<D>(vt, v, a.v.st, k0, a.tk);
    __syncthreads();

    // S = Q K^T for this warp's 16 queries and the tile's keys.
    float s[kTile / 8][4];
    zero_fragments(s);
    BRISK_ATTENTION_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      BRISK_ATTENTION_UNROLL
      for (int n = 0; n < kTile / 8; ++n) {
        uint32_t b[2];
        load_b(b, ks, kLd, n * 8, kk * 16, lane);
        mma<T>(s[n], qa[kk], b);
      }
    }
    // Scores in log2 units; keys past tk and (causal) after the query are -inf.
    const bool edge = (Causal && j == tile) || k0 + kTile > a.tk;
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      BRISK_ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int64_t col = k0 + n * 8 + t2 + (e & 1);
        float x = s[n][e] * a.scale_log2;
        if (edge && (col >= a.tk || (Causal && col > rows[e >> 1]))) x = -INFINITY;
        s[n][e] = x;
      }
    }
    // Online softmax: the rows' new max over this lane's columns, then over the 4 lanes of the row.
    float mx[2] = {m[0], m[1]};
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
    }
    float base[2];
    BRISK_ATTENTION_UNROLL
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 2));
      // A row that has seen only masked keys keeps max -inf; subtracting 0 then gives exp2(-inf)
      // = 0 for its scores instead of exp2(-inf + inf) = NaN.
      base[r] = mx[r] == -INFINITY ? 0.f : mx[r];
      const float alpha = exp2f(m[r] - base[r]);  // 0 while m is -inf
      m[r] = mx[r];
      l[r] *= alpha;
      BRISK_ATTENTION_UNROLL
      for (int d = 0; d < D / 8; ++d) {
        o[d][2 * r] *= alpha;
        o[d][2 * r + 1] *= alpha;
      }
    }
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      BRISK_ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[n][e] - base[e >> 1]);
        s[n][e] = p;
        l[e >> 1] += p;
      }
    }
    mma_pb<T, D>(o, s, vt, lane);  // O += P V (the row sums keep P's f32 values)
  }

  uint16_t* out = head_ptr(a.out, bh, a.heads);
  float* lse = a.lse + bh * a.tq;
  BRISK_ATTENTION_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFull, l[r], 1);
    l[r] += __shfl_xor_sync(kFull, l[r], 2);
    if (rows[r] >= a.tq) continue;
    // A row with no key to see (not reachable from the public op) gets zeros and L = -inf.
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    BRISK_ATTENTION_UNROLL
    for (int d = 0; d < D / 8; ++d)
      *reinterpret_cast<uint32_t*>(out + rows[r] * a.out.st + d * 8 + t2) =
          pack<T>(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
    if ((lane & 3) == 0) lse[rows[r]] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
  }
}

// One stored element as f32.
template <class T>
__device__ inline float load_acc(const void* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>)
    return static_cast<const float*>(p)[i];
  else
    return kernels::device::to_acc(T::from_bits(static_cast<const uint16_t*>(p)[i]));
}

// delta[row] = sum_d dO[row, d] * O[row, d] in f32: a warp per row of (B * H * tq).
template <class T, int D>
__global__ void __launch_bounds__(256) attention_delta_kernel(const Args a) {
  using E = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (row >= a.batch_heads * a.tq) return;  // whole warps
  const int64_t bh = row / a.tq, t = row % a.tq;
  const E* go = head_ptr<E>(a.g, bh, a.heads) + t * a.g.st;
  const E* o = head_ptr<E>(a.o, bh, a.heads) + t * a.o.st;
  float acc = 0.f;
  for (int d = lane; d < D; d += 32) acc += load_acc<T>(go, d) * load_acc<T>(o, d);
  BRISK_ATTENTION_UNROLL
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFull, acc, off);
  if (lane == 0) a.delta[row] = acc;
}

template <int D>
constexpr size_t backward_kv_smem_bytes() {
  return sizeof(uint16_t) * (4 * kTile * (D + kPad) + 2 * D * kTileLd) + sizeof(float) * 2 * kTile;
}

// dK, dV of one (64-key tile, batch * head): grid (B * H, key tiles). Shared: K, V, Q, dO
// row-major, Q^T, dO^T, and the query tile's L (in log2 units) and delta.
template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_backward_kv_kernel(const Args a) {
  static_assert(D % 16 == 0 && D <= 128, "attention: head dim must be a multiple of 16, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = D + kPad;
  uint16_t* ks = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* vs = ks + kTile * kLd;
  uint16_t* qs = vs + kTile * kLd;
  uint16_t* gs = qs + kTile * kLd;  // dO
  uint16_t* qt = gs + kTile * kLd;  // Q^T (D, kTile)
  uint16_t* gt = qt + D * kTileLd;  // dO^T (D, kTile)
  float* lse_s = reinterpret_cast<float*>(gt + D * kTileLd);
  float* delta_s = lse_s + kTile;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int64_t bh = blockIdx.x;
  const int64_t j = blockIdx.y;  // key tile: the first ones see the most query tiles when causal
  const int64_t k0 = j * kTile;
  const uint16_t* q = head_ptr(a.q, bh, a.heads);
  const uint16_t* k = head_ptr(a.k, bh, a.heads);
  const uint16_t* v = head_ptr(a.v, bh, a.heads);
  const uint16_t* go = head_ptr(a.g, bh, a.heads);
  const float* lse = a.lse + bh * a.tq;
  const float* delta = a.delta + bh * a.tq;

  stage_rows<D>(ks, k, a.k.st, k0, a.tk);
  stage_rows<D>(vs, v, a.v.st, k0, a.tk);
  float dk[D / 8][4], dv[D / 8][4];
  BRISK_ATTENTION_UNROLL
  for (int d = 0; d < D / 8; ++d) {
    dk[d][0] = dk[d][1] = dk[d][2] = dk[d][3] = 0.f;
    dv[d][0] = dv[d][1] = dv[d][2] = dv[d][3] = 0.f;
  }
  const int64_t keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  const int64_t query_tiles = ceil_tiles(a.tq);

  for (int64_t i = Causal ? j : 0; i < query_tiles; ++i) {
    const int64_t q0 = i * kTile;
    __syncthreads();  // every warp is done with the previous query tile (and K, V are staged)
    stage_rows<D>(qs, q, a.q.st, q0, a.tq);
    stage_rows<D>(gs, go, a.g.st, q0, a.tq);
    stage_rows_t<D>(qt, q, a.q.st, q0, a.tq);
    stage_rows_t<D>(gt, go, a.g.st, q0, a.tq);
    for (int r = static_cast<int>(threadIdx.x); r < kTile; r += kThreads) {
      const int64_t row = q0 + r;
      // +inf for rows past tq or without any key (L = -inf): exp2(x - inf) = 0 drops them.
      const float l2 = row < a.tq ? lse[row] * kLog2e : INFINITY;
      lse_s[r] = l2 == -INFINITY ? INFINITY : l2;
      delta_s[r] = row < a.tq ? delta[row] : 0.f;
    }
    __syncthreads();

    // S^T = K Q^T: this warp's 16 keys x the tile's 64 queries; then P^T from L, 0 where masked.
    float s[kTile / 8][4];
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    BRISK_ATTENTION_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4];
      load_a(ka, ks, kLd, warp * 16, kk * 16, lane);
      BRISK_ATTENTION_UNROLL
      for (int n = 0; n < kTile / 8; ++n) {
        uint32_t b[2];
        load_b(b, qs, kLd, n * 8, kk * 16, lane);
        mma<T>(s[n], ka, b);
      }
    }
    const bool edge = (Causal && i == j) || q0 + kTile > a.tq || k0 + kTile > a.tk;
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      BRISK_ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + t2 + (e & 1);
        float p = exp2f(s[n][e] * a.scale_log2 - lse_s[c]);
        const int64_t row = q0 + c, key = keys[e >> 1];
        if (edge && (row >= a.tq || key >= a.tk || (Causal && key > row))) p = 0.f;
        s[n][e] = p;
      }
    }
    mma_pb<T, D>(dv, s, gt, lane);  // dV += P^T dO (B[k = query][n = d] from dO^T)
    // dP^T = V dO^T (B[k = d][n = query] from dO row-major).
    float dp[kTile / 8][4];
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
    BRISK_ATTENTION_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t va[4];
      load_a(va, vs, kLd, warp * 16, kk * 16, lane);
      BRISK_ATTENTION_UNROLL
      for (int n = 0; n < kTile / 8; ++n) {
        uint32_t b[2];
        load_b(b, gs, kLd, n * 8, kk * 16, lane);
        mma<T>(dp[n], va, b);
      }
    }
    // dS^T = P^T * (dP^T - delta); dK += dS^T Q (B[k = query][n = d] from Q^T).
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      BRISK_ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - delta_s[n * 8 + t2 + (e & 1)]);
    }
    mma_pb<T, D>(dk, dp, qt, lane);
  }

  uint16_t* dk_out = head_ptr(a.out, bh, a.heads);
  uint16_t* dv_out = head_ptr(a.out2, bh, a.heads);
  BRISK_ATTENTION_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= a.tk) continue;
    BRISK_ATTENTION_UNROLL
    for (int d = 0; d < D / 8; ++d) {
      const int64_t at = d * 8 + t2;
      *reinterpret_cast<uint32_t*>(dk_out + keys[r] * a.out.st + at) =
          pack<T>(dk[d][2 * r] * a.scale, dk[d][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(dv_out + keys[r] * a.out2.st + at) = pack<T>(dv[d][2 * r], dv[d][2 * r + 1]);
    }
  }
}

template <int D>
constexpr size_t backward_q_smem_bytes() {
  return sizeof(uint16_t) * (4 * kTile * (D + kPad) + D * kTileLd);
}

// dQ of one (64-query tile, batch * head): grid (B * H, query tiles), the largest first. Shared:
// Q, dO (this tile), K, V row-major and K^T (the key tile).
template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_backward_q_kernel(const Args a) {
  static_assert(D % 16 == 0 && D <= 128, "attention: head dim must be a multiple of 16, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = D + kPad;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* gs = qs + kTile * kLd;  // dO
  uint16_t* ks = gs + kTile * kLd;
  uint16_t* vs = ks + kTile * kLd;
  uint16_t* kt = vs + kTile * kLd;  // K^T (D, kTile)
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int64_t bh = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t q0 = tile * kTile;
  const uint16_t* q = head_ptr(a.q, bh, a.heads);
  const uint16_t* k = head_ptr(a.k, bh, a.heads);
  const uint16_t* v = head_ptr(a.v, bh, a.heads);
  const uint16_t* go = head_ptr(a.g, bh, a.heads);

  stage_rows<D>(qs, q, a.q.st, q0, a.tq);
  stage_rows<D>(gs, go, a.g.st, q0, a.tq);
  const int64_t rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float l2[2], dl[2];
  BRISK_ATTENTION_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float x = rows[r] < a.tq ? a.lse[bh * a.tq + rows[r]] * kLog2e : INFINITY;
    l2[r] = x == -INFINITY ? INFINITY : x;
    dl[r] = rows[r] < a.tq ? a.delta[bh * a.tq + rows[r]] : 0.f;
  }
  float dq[D / 8][4];
  zero_fragments(dq);
  int64_t key_tiles = ceil_tiles(a.tk);
  if (Causal) key_tiles = key_tiles < tile + 1 ? key_tiles : tile + 1;

  for (int64_t j = 0; j < key_tiles; ++j) {
    const int64_t k0 = j * kTile;
    __syncthreads();
    stage_rows<D>(ks, k, a.k.st, k0, a.tk);
    stage_rows<D>(vs, v, a.v.st, k0, a.tk);
    stage_rows_t<D>(kt, k, a.k.st, k0, a.tk);
    __syncthreads();

    // S = Q K^T and dP = dO V^T: this warp's 16 queries x the tile's 64 keys.
    float s[kTile / 8][4], dp[kTile / 8][4];
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
    }
    BRISK_ATTENTION_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], ga[4];
      load_a(qa, qs, kLd, warp * 16, kk * 16, lane);
      load_a(ga, gs, kLd, warp * 16, kk * 16, lane);
      BRISK_ATTENTION_UNROLL
      for (int n = 0; n < kTile / 8; ++n) {
        uint32_t b[2];
        load_b(b, ks, kLd, n * 8, kk * 16, lane);
        mma<T>(s[n], qa, b);
        load_b(b, vs, kLd, n * 8, kk * 16, lane);
        mma<T>(dp[n], ga, b);
      }
    }
    // dS = P * (dP - delta), P = exp2(S * scale * log2 e - L * log2 e), 0 where masked.
    const bool edge = (Causal && j == tile) || k0 + kTile > a.tk || q0 + kTile > a.tq;
    BRISK_ATTENTION_UNROLL
    for (int n = 0; n < kTile / 8; ++n) {
      BRISK_ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int64_t col = k0 + n * 8 + t2 + (e & 1), row = rows[e >> 1];
        float p = exp2f(s[n][e] * a.scale_log2 - l2[e >> 1]);
        if (edge && (row >= a.tq || col >= a.tk || (Causal && col > row))) p = 0.f;
        s[n][e] = p * (dp[n][e] - dl[e >> 1]);
      }
    }
    mma_pb<T, D>(dq, s, kt, lane);  // dQ += dS K (B[k = key][n = d] from K^T)
  }

  uint16_t* dq_out = head_ptr(a.out, bh, a.heads);
  BRISK_ATTENTION_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= a.tq) continue;
    BRISK_ATTENTION_UNROLL
    for (int d = 0; d < D / 8; ++d)
      *reinterpret_cast<uint32_t*>(dq_out + rows[r] * a.out.st + d * 8 + t2) =
          pack<T>(dq[d][2 * r] * a.scale, dq[d][2 * r + 1] * a.scale);
  }
}

// ---- f32: plain FMA kernels (no tensor cores), the same tiles and passes ----
// Two threads per row of a 64-row tile (lanes 2r and 2r + 1): thread h of the pair holds dims
// 2i + h (i < D / 2), so the pair reads neighbouring words. Shared tiles are f32 with rows padded
// to D + 2 words: a warp's 16 rows read at 2 * 16 different banks when each thread reads its own
// row, and at 2 when all read one row (a broadcast). The pair's dot products combine with one
// shuffle between its two lanes (the pair always takes the same branches: one row).

template <int D>
constexpr int f32_ld() {
  return D + 2;
}

// Rows [row0, row0 + kTile) of a (rows, D) f32 slice into s[r][c] (row stride D + 2), zeros past `rows`.
template <int D>
__device__ inline void stage_rows_f32(float* s, const float* src, int64_t st, int64_t row0, int64_t rows) {
  constexpr int kChunks = D / 4;
  for (int i = threadIdx.x; i < kTile * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < rows) v = *reinterpret_cast<const float4*>(src + (row0 + r) * st + c);
    float* d = s + r * f32_ld<D>() + c;  // padded rows are 8-byte aligned only: scalar stores
    d[0] = v.x;
    d[1] = v.y;
    d[2] = v.z;
    d[3] = v.w;
  }
}

// sum_i x[i] * row[2i + h] over the pair (both lanes get the full dot product).
template <int D>
__device__ inline float pair_dot(const float (&x)[D / 2], const float* row, int h, unsigned pair) {
  float acc = 0.f;
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) acc = fmaf(x[i], row[2 * i + h], acc);
  return acc + __shfl_xor_sync(pair, acc, 1);
}

// sum_d a[d] * b[d] of two shared rows over the pair.
template <int D>
__device__ inline float pair_dot_rows(const float* a, const float* b, int h, unsigned pair) {
  float acc = 0.f;
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) acc = fmaf(a[2 * i + h], b[2 * i + h], acc);
  return acc + __shfl_xor_sync(pair, acc, 1);
}

template <int D>
constexpr size_t forward_f32_smem_bytes() {
  return sizeof(float) * 2 * kTile * f32_ld<D>();
}

// Forward, f32: grid (B * H, query tiles), the largest first; shared K, V. Each pair keeps its
// query row (pre-scaled to log2 units) and output row in registers and takes the keys one at a
// time with the online softmax.
template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_forward_f32_kernel(const Args a) {
  static_assert(D % 4 == 0 && D <= 128, "attention (f32): head dim must be a multiple of 4, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = f32_ld<D>();
  float* ks = reinterpret_cast<float*>(smem_words);
  float* vs = ks + kTile * kLd;
  const int lane = static_cast<int>(threadIdx.x) & 31, h = lane & 1;
  const unsigned pair = 3u << (lane & 30);
  const int64_t bh = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t q0 = tile * kTile, row = q0 + (threadIdx.x >> 1);
  const float* q = head_ptr<float>(a.q, bh, a.heads);
  const float* k = head_ptr<float>(a.k, bh, a.heads);
  const float* v = head_ptr<float>(a.v, bh, a.heads);
  float qr[D / 2], acc[D / 2];
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) {
    qr[i] = row < a.tq ? q[row * a.q.st + 2 * i + h] * a.scale_log2 : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  int64_t key_tiles = ceil_tiles(a.tk);
  if (Causal) key_tiles = key_tiles < tile + 1 ? key_tiles : tile + 1;
  for (int64_t j = 0; j < key_tiles; ++j) {
    const int64_t k0 = j * kTile;
    __syncthreads();
    stage_rows_f32<D>(ks, k, a.k.st, k0, a.tk);
    stage_rows_f32<D>(vs, v, a.v.st, k0, a.tk);
    __syncthreads();
    const int n = static_cast<int>(a.tk - k0 < kTile ? a.tk - k0 : kTile);
    for (int c = 0; c < n; ++c) {
      if (Causal && k0 + c > row) break;  // the pair breaks together
      const float x = pair_dot<D>(qr, ks + c * kLd, h, pair);
      const float* vr = vs + c * kLd;
      if (x > m) {  // a new max: rescale what was summed (alpha = 0 the first time)
        const float alpha = exp2f(m - x);
        l = l * alpha + 1.f;
        BRISK_ATTENTION_UNROLL
        for (int i = 0; i < D / 2; ++i) acc[i] = fmaf(acc[i], alpha, vr[2 * i + h]);
        m = x;
      } else {
        const float p = exp2f(x - m);
        l += p;
        BRISK_ATTENTION_UNROLL
        for (int i = 0; i < D / 2; ++i) acc[i] = fmaf(p, vr[2 * i + h], acc[i]);
      }
    }
  }
  if (row >= a.tq) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  float* out = head_ptr<float>(a.out, bh, a.heads) + row * a.out.st;
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) out[2 * i + h] = acc[i] * inv;
  if (h == 0) a.lse[bh * a.tq + row] = l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY;
}

// L in log2 units for the backward, +inf where the row has no key (so its p = 0).
__device__ inline float lse_log2(const Args& a, int64_t bh, int64_t row) {
  const float x = row < a.tq ? a.lse[bh * a.tq + row] * kLog2e : INFINITY;
  return x == -INFINITY ? INFINITY : x;
}

// dQ, f32: grid (B * H, query tiles), the largest first; shared K, V. Each pair keeps its q, dO
// and dq rows in registers.
template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_backward_q_f32_kernel(const Args a) {
  static_assert(D % 4 == 0 && D <= 128, "attention (f32): head dim must be a multiple of 4, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = f32_ld<D>();
  float* ks = reinterpret_cast<float*>(smem_words);
  float* vs = ks + kTile * kLd;
  const int lane = static_cast<int>(threadIdx.x) & 31, h = lane & 1;
  const unsigned pair = 3u << (lane & 30);
  const int64_t bh = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t q0 = tile * kTile, row = q0 + (threadIdx.x >> 1);
  const float* q = head_ptr<float>(a.q, bh, a.heads);
  const float* k = head_ptr<float>(a.k, bh, a.heads);
  const float* v = head_ptr<float>(a.v, bh, a.heads);
  const float* go = head_ptr<float>(a.g, bh, a.heads);
  float qr[D / 2], gr[D / 2], dq[D / 2];
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) {
    qr[i] = row < a.tq ? q[row * a.q.st + 2 * i + h] : 0.f;
    gr[i] = row < a.tq ? go[row * a.g.st + 2 * i + h] : 0.f;
    dq[i] = 0.f;
  }
  const float l2 = lse_log2(a, bh, row);
  const float dl = row < a.tq ? a.delta[bh * a.tq + row] : 0.f;
  int64_t key_tiles = ceil_tiles(a.tk);
  if (Causal) key_tiles = key_tiles < tile + 1 ? key_tiles : tile + 1;
  for (int64_t j = 0; j < key_tiles; ++j) {
    const int64_t k0 = j * kTile;
    __syncthreads();
    stage_rows_f32<D>(ks, k, a.k.st, k0, a.tk);
    stage_rows_f32<D>(vs, v, a.v.st, k0, a.tk);
    __syncthreads();
    const int n = static_cast<int>(a.tk - k0 < kTile ? a.tk - k0 : kTile);
    for (int c = 0; c < n; ++c) {
      if (Causal && k0 + c > row) break;
      const float* kr = ks + c * kLd;
      const float p = exp2f(pair_dot<D>(qr, kr, h, pair) * a.scale_log2 - l2);
      const float ds = p * (pair_dot<D>(gr, vs + c * kLd, h, pair) - dl);
      BRISK_ATTENTION_UNROLL
      for (int i = 0; i < D / 2; ++i) dq[i] = fmaf(ds, kr[2 * i + h], dq[i]);
    }
  }
  if (row >= a.tq) return;
  float* out = head_ptr<float>(a.out, bh, a.heads) + row * a.out.st;
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) out[2 * i + h] = dq[i] * a.scale;
}

template <int D>
constexpr size_t backward_kv_f32_smem_bytes() {
  return sizeof(float) * (4 * kTile * f32_ld<D>() + 2 * kTile);
}

// dK, dV, f32: grid (B * H, key tiles); shared K, V (this key tile), Q, dO, L and delta (the
// query tile). Each pair owns a key row; its dk and dv rows stay in registers.
template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads) attention_backward_kv_f32_kernel(const Args a) {
  static_assert(D % 4 == 0 && D <= 128, "attention (f32): head dim must be a multiple of 4, at most 128");
  uint4* smem_words = dynamic_smem();
  constexpr int kLd = f32_ld<D>();
  float* ks = reinterpret_cast<float*>(smem_words);
  float* vs = ks + kTile * kLd;
  float* qs = vs + kTile * kLd;
  float* gs = qs + kTile * kLd;
  float* lse_s = gs + kTile * kLd;
  float* delta_s = lse_s + kTile;
  const int lane = static_cast<int>(threadIdx.x) & 31, h = lane & 1;
  const unsigned pair = 3u << (lane & 30);
  const int64_t bh = blockIdx.x;
  const int64_t j = blockIdx.y;
  const int64_t k0 = j * kTile;
  const int r = static_cast<int>(threadIdx.x) >> 1;
  const int64_t key = k0 + r;
  const float* q = head_ptr<float>(a.q, bh, a.heads);
  const float* k = head_ptr<float>(a.k, bh, a.heads);
  const float* v = head_ptr<float>(a.v, bh, a.heads);
  const float* go = head_ptr<float>(a.g, bh, a.heads);
  stage_rows_f32<D>(ks, k, a.k.st, k0, a.tk);
  stage_rows_f32<D>(vs, v, a.v.st, k0, a.tk);
  float dk[D / 2], dv[D / 2];
  BRISK_ATTENTION_UNROLL
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  const float* kr = ks + r * kLd;
  const float* vr = vs + r * kLd;
  const int64_t query_tiles = ceil_tiles(a.tq);
  for (int64_t i = Causal ? j : 0; i < query_tiles; ++i) {
    const int64_t q0 = i * kTile;
    __syncthreads();
    stage_rows_f32<D>(qs, q, a.q.st, q0, a.tq);
    stage_rows_f32<D>(gs, go, a.g.st, q0, a.tq);
    for (int c = static_cast<int>(threadIdx.x); c < kTile; c += kThreads) {
      lse_s[c] = lse_log2(a, bh, q0 + c);
      delta_s[c] = q0 + c < a.tq ? a.delta[bh * a.tq + q0 + c] : 0.f;
    }
    __syncthreads();
    if (key >= a.tk) continue;  // a pair past the keys (no shuffle partner elsewhere; barriers above)
    const int n = static_cast<int>(a.tq - q0 < kTile ? a.tq - q0 : kTile);
    int first = 0;
    if (Causal && key > q0) first = static_cast<int>(key - q0);  // queries before the key see nothing
    for (int c = first; c < n; ++c) {
      const float* qc = qs + c * kLd;
      const float* gc = gs + c * kLd;
      const float p = exp2f(pair_dot_rows<D>(kr, qc, h, pair) * a.scale_log2 - lse_s[c]);
      const float ds = p * (pair_dot_rows<D>(vr, gc, h, pair) - delta_s[c]);
      BRISK_ATTENTION_UNROLL
      for (int d = 0; d < D / 2; ++d) {
        dv[d] = fmaf(p, gc[2 * d + h], dv[d]);
        dk[d] = fmaf(ds, qc[2 * d + h], dk[d]);
      }
    }
  }
  if (key >= a.tk) return;
  float* dk_out = head_ptr<float>(a.out, bh, a.heads) + key * a.out.st;
  float* dv_out = head_ptr<float>(a.out2, bh, a.heads) + key * a.out2.st;
  BRISK_ATTENTION_UNROLL
  for (int d = 0; d < D / 2; ++d) {
    dk_out[2 * d + h] = dk[d] * a.scale;
    dv_out[2 * d + h] = dv[d];
  }
}

}  // namespace brisk::kernels::cuda::attention_detail
