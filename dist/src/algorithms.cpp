// brisk's own collective algorithms on top of point-to-point messages. Each one is the
// textbook algorithm, commented for readers who want to learn how collectives work:
//
//   ring all-reduce        2(W-1)/W of the data crosses each link: bandwidth-optimal
//                          (what NCCL does between GPUs); 2(W-1) steps: latency grows with W
//   halving-doubling       also bandwidth-optimal for powers of two, but only 2 log2(W) steps:
//                          better for small and medium messages (Rabenseifner's algorithm)
//   binomial-tree bcast    log2(W) rounds; chunks are pipelined down the tree
//
// Notation: W ranks, this is rank r, the buffer holds n elements of es bytes each.
// Every result element is reduced by exactly one rank and then copied to the others, so all
// ranks hold bit-identical results (what data-parallel training needs).
#include "algorithms.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "brisk/util/env.h"

namespace brisk::dist::detail {
namespace {

constexpr int kTagRing = 101, kTagRhd = 102, kTagTree = 103;
// MPI counts are ints: whole-segment messages are split below this.
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;

int mod(int a, int w) {
  return ((a % w) + w) % w;
}

// Sends `sbytes` from `sbuf` to `to` while receiving `rbytes` into `rbuf` from `from`
// (both directions at once, so neighbours in a ring never wait on each other).
void exchange(Transport& t, const char* sbuf, int64_t sbytes, int to, char* rbuf, int64_t rbytes, int from, int tag) {
  std::vector<Request> reqs;
  for (int64_t o = 0; o < rbytes; o += kMaxMessageBytes)
    reqs.push_back(t.irecv(rbuf + o, std::min(kMaxMessageBytes, rbytes - o), from, tag, Channel::Algorithm));
  for (int64_t o = 0; o < sbytes; o += kMaxMessageBytes)
    reqs.push_back(t.isend(sbuf + o, std::min(kMaxMessageBytes, sbytes - o), to, tag, Channel::Algorithm));
  t.wait_all(reqs.data(), static_cast<int>(reqs.size()));
}

}  // namespace

Scratch::~Scratch() {
  if (data_) host_free(data_);
}

void* Scratch::get(size_t bytes) {
  if (bytes > bytes_) {
    if (data_) host_free(data_);
    data_ = host_alloc(bytes);
    bytes_ = bytes;
  }
  return data_;
}

int64_t ring_chunk_bytes() {
  // 256 KiB: two receive chunks stay in L2 while they are reduced, and a 16 MiB all-reduce
  // on 4 ranks still has 16 chunks per step to pipeline.
  static const int64_t bytes = [] { return envvar::get_int("BRISK_RING_CHUNK_KB", 256, 1, int64_t{1} << 30) * 1024; }();
  return bytes;
}

// ---------------------------------------------------------------------------------------
// Ring all-reduce.
//
// Cut the buffer into W segments; segment i is elements [n*i/W, n*(i+1)/W). Ranks form a
// ring r -> r+1. Two phases of W-1 steps each:
//
// 1. reduce-scatter: at step s rank r sends segment (r-s) to its right neighbour and
//    receives segment (r-s-1) from its left neighbour, adding it into its own copy. A
//    segment travels once round the ring collecting every rank's contribution, so after
//    W-1 steps rank r holds the complete sum of segment (r+1).
//      W=3, after step 0:  r0 has s2 = x2+x0     r1 has s0 = x0+x1     r2 has s1 = x1+x2
//      after step 1:       r0 has s1 (complete)  r1 has s2 (complete)  r2 has s0 (complete)
// 2. all-gather: at step s rank r sends segment (r+1-s) (complete) and receives segment
//    (r-s), overwriting its copy. After W-1 steps every rank has every complete segment.
//
// Each rank sends 2(W-1) segments of n/W elements: 2(W-1)/W of the buffer, the minimum.
//
// Pipelining: within a reduce-scatter step a segment moves in chunks. While chunk k is
// being added into the buffer, chunk k+1 is already in flight into the other half of a
// two-chunk receive buffer; each received chunk is reduced while still in cache.
// ---------------------------------------------------------------------------------------
void ring_all_reduce(Transport& t, void* data, int64_t n, DType dt, ReduceOp op, Scratch& scratch) {
  const int W = t.size(), r = t.rank();
  if (W == 1 || n == 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  char* buf = static_cast<char*>(data);
  const int right = mod(r + 1, W), left = mod(r - 1, W);
  auto seg_begin = [&](int i) { return n / W * i + std::min<int64_t>(i, n % W); };  // first n%W segments get one more
  auto seg_len = [&](int i) { return seg_begin(i + 1) - seg_begin(i); };

  const int64_t chunk = std::max<int64_t>(1, ring_chunk_bytes() / es);  // elements per chunk
  char* recv_buf[2];
  recv_buf[0] = static_cast<char*>(scratch.get(static_cast<size_t>(2 * chunk * es)));
  recv_buf[1] = recv_buf[0] + chunk * es;

  // Phase 1: reduce-scatter.
  std::vector<Request> sends;
  for (int s = 0; s < W - 1; ++s) {
    const int send_seg = mod(r - s, W), recv_seg = mod(r - s - 1, W);
    const int64_t send_off = seg_begin(send_seg), send_len = seg_len(send_seg);
    const int64_t recv_off = seg_begin(recv_seg), recv_len = seg_len(recv_seg);
    const int64_t send_chunks = (send_len + chunk - 1) / chunk, recv_chunks = (recv_len + chunk - 1) / chunk;
    auto recv_count = [&](int64_t k) { return std::min(chunk, recv_len - k * chunk); };

    Request recv[2];
    if (recv_chunks > 0) recv[0] = t.irecv(recv_buf[0], recv_count(0) * es, left, kTagRing, Channel::Algorithm);
    sends.clear();
    for (int64_t k = 0; k < std::max(send_chunks, recv_chunks); ++k) {
      if (k < send_chunks) {
        const int64_t count = std::min(chunk, send_len - k * chunk);
        sends.push_back(t.isend(buf + (send_off + k * chunk) * es, count * es, right, kTagRing, Channel::Algorithm));
      }
      // Chunk k+1 lands in the half of the receive buffer chunk k-1 used (already reduced).
      if (k + 1 < recv_chunks)
        recv[(k + 1) % 2] = t.irecv(recv_buf[(k + 1) % 2], recv_count(k + 1) * es, left, kTagRing, Channel::Algorithm);
      if (k < recv_chunks) {
        t.wait(recv[k % 2]);
        reduce_into(buf + (recv_off + k * chunk) * es, recv_buf[k % 2], recv_count(k), dt, op);
      }
    }
    // The segment sent in this step is the one received in the next: sends must be done
    // before the next step starts adding into... a different segment; waiting here keeps
    // the number of requests bounded and the steps easy to reason about.
    t.wait_all(sends.data(), static_cast<int>(sends.size()));
  }

  // This rank now owns the complete segment (r+1). An average divides it once, here, so the
  // division is done once per element and the result is still identical on every rank.
  const int owned = mod(r + 1, W);
  if (op == ReduceOp::Avg) divide_by(buf + seg_begin(owned) * es, seg_len(owned), dt, W);

  // Phase 2: all-gather the complete segments round the same ring (no arithmetic).
  for (int s = 0; s < W - 1; ++s) {
    const int send_seg = mod(r + 1 - s, W), recv_seg = mod(r - s, W);
    exchange(t, buf + seg_begin(send_seg) * es, seg_len(send_seg) * es, right, buf + seg_begin(recv_seg) * es,
             seg_len(recv_seg) * es, left, kTagRing);
  }
}

// ---------------------------------------------------------------------------------------
// Recursive halving-doubling (Rabenseifner) all-reduce.
//
// For W a power of two, P = W: cut the buffer into P blocks. Reduce-scatter by recursive
// halving: pair with the rank whose id differs in the highest bit; each keeps one half of
// the current window and sends the other half to its partner, adding what it receives.
// Repeat with the next bit on the kept half. After log2(P) steps rank r owns block r fully
// reduced. Then all-gather by recursive doubling: exchange owned windows with the partner
// differing in the lowest bit, then the next bit ... each step doubles the window.
//
//   P=4, rank 1 (binary 01): keep blocks {0,1} (bit 2 clear) from rank 3, then keep
//   block {1} (bit 1 set) from rank 0; gather {0,1} with rank 0, then {0..3} with rank 3.
//
// W not a power of two: P = the largest power of two below W, R = W - P extra ranks. First
// the lowest 2R ranks pair up: each even rank hands its whole buffer to the odd rank above
// it and sits out; the P remaining ranks run the algorithm above (renumbered 0..P-1), then
// each odd rank hands the result back to its even partner.
// ---------------------------------------------------------------------------------------
void rhd_all_reduce(Transport& t, void* data, int64_t n, DType dt, ReduceOp op, Scratch& scratch) {
  const int W = t.size(), r = t.rank();
  if (W == 1 || n == 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  char* buf = static_cast<char*>(data);
  char* tmp = static_cast<char*>(scratch.get(static_cast<size_t>(n * es)));
  int P = 1;
  while (P * 2 <= W) P *= 2;
  const int R = W - P;

  // Fold the extra ranks in: even ranks below 2R give their data to the odd rank above.
  int id = -1;  // this rank's number among the P that take part (-1: sitting out)
  if (r < 2 * R) {
    if (r % 2 == 0) {
      exchange(t, buf, n * es, r + 1, nullptr, 0, -1, kTagRhd);
    } else {
      exchange(t, nullptr, 0, -1, tmp, n * es, r - 1, kTagRhd);
      reduce_into(buf, tmp, n, dt, op);
      id = r / 2;
    }
  } else {
    id = r - R;
  }
  auto real_rank = [&](int i) { return i < R ? 2 * i + 1 : i + R; };
  auto block = [&](int b) { return n / P * b + std::min<int64_t>(b, n % P); };  // first element of block b

  if (id >= 0) {
    // Reduce-scatter by recursive halving: the window [lo, hi) of blocks shrinks by half.
    int lo = 0, hi = P;
    for (int dist = P / 2; dist >= 1; dist /= 2) {
      const int partner = real_rank(id ^ dist), mid = lo + dist;
      const bool upper = (id & dist) != 0;
      const int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
      const int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
      const int64_t keep_n = block(keep_hi) - block(keep_lo), give_n = block(give_hi) - block(give_lo);
      exchange(t, buf + block(give_lo) * es, give_n * es, partner, tmp, keep_n * es, partner, kTagRhd);
      reduce_into(buf + block(keep_lo) * es, tmp, keep_n, dt, op);
      lo = keep_lo;
      hi = keep_hi;
    }
    // Now [lo, hi) = [id, id+1): this rank owns block `id`, complete.
    if (op == ReduceOp::Avg) divide_by(buf + block(lo) * es, block(hi) - block(lo), dt, W);
    // All-gather by recursive doubling: swap windows with the partner, the window doubles.
    for (int dist = 1; dist < P; dist *= 2) {
      const int partner = real_rank(id ^ dist);
      const int plo = (id & dist) ? lo - dist : hi, phi = plo + dist;
      exchange(t, buf + block(lo) * es, (block(hi) - block(lo)) * es, partner, buf + block(plo) * es,
               (block(phi) - block(plo)) * es, partner, kTagRhd);
      lo = std::min(lo, plo);
      hi = std::max(hi, phi);
    }
  }

  // Unfold: the odd ranks below 2R hand the finished buffer back to their even partners.
  if (r < 2 * R) {
    if (r % 2 == 0) {
      exchange(t, nullptr, 0, -1, buf, n * es, r + 1, kTagRhd);
    } else {
      exchange(t, buf, n * es, r - 1, nullptr, 0, -1, kTagRhd);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Binomial-tree broadcast.
//
// Number ranks relative to the root: v = (r - root) mod W. Rank v receives from its parent
// v - lowbit(v) (v with its lowest set bit cleared), then sends to its children v + m for
// m = lowbit(v)/2, ..., 2, 1 (the root's children: every power of two below W). In round k
// the 2^k ranks that have the data each send it to one more: log2(W) rounds.
//
//   W=8, root 0:  0 -> 4;  0 -> 2, 4 -> 6;  0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
//
// Large buffers move in chunks, so a rank forwards chunk c to its children while chunk c+1
// is still arriving from its parent: the tree works as a pipeline.
// ---------------------------------------------------------------------------------------
void tree_broadcast(Transport& t, void* data, int64_t bytes, int root) {
  const int W = t.size(), r = t.rank();
  if (W == 1 || bytes == 0) return;
  char* buf = static_cast<char*>(data);
  const int v = mod(r - root, W);
  int parent = -1;
  int mask = 1;
  while (mask < W) {
    if (v & mask) {
      parent = mod(v - mask + root, W);
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;  // largest subtree first: it has the longest way to go
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < W) children.push_back(mod(v + mask + root, W));

  const int64_t chunk = std::max<int64_t>(ring_chunk_bytes() * 2, 1);
  const int64_t chunks = (bytes + chunk - 1) / chunk;
  auto len = [&](int64_t c) { return std::min(chunk, bytes - c * chunk); };
  std::vector<Request> sends;
  Request recv[2];
  if (parent >= 0) recv[0] = t.irecv(buf, len(0), parent, kTagTree, Channel::Algorithm);
  for (int64_t c = 0; c < chunks; ++c) {
    if (parent >= 0) {
      if (c + 1 < chunks)
        recv[(c + 1) % 2] = t.irecv(buf + (c + 1) * chunk, len(c + 1), parent, kTagTree, Channel::Algorithm);
      t.wait(recv[c % 2]);
    }
    for (int child : children) sends.push_back(t.isend(buf + c * chunk, len(c), child, kTagTree, Channel::Algorithm));
  }
  t.wait_all(sends.data(), static_cast<int>(sends.size()));
}

}  // namespace brisk::dist::detail
