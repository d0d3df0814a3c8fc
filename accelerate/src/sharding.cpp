// Sharding data across ranks by batches, as Accelerate does (docs/accelerator-options.md "Data sharding"):
// the batch plan of a map-style loader and the stream of an IterableDataset.
#include "sharding.h"

#include <algorithm>

#include "brisk/accelerate/accelerator.h"
#include "brisk/util/error.h"

namespace brisk::accelerate {

namespace {

// `pool` repeated until it holds at least n items (the "degenerate" small-dataset case).
std::vector<int64_t> cycle_to(std::vector<int64_t> pool, size_t n) {
  const std::vector<int64_t> once = pool;
  while (!once.empty() && pool.size() < n) pool.insert(pool.end(), once.begin(), once.end());
  return pool;
}

std::vector<int64_t> slice(const std::vector<int64_t>& v, int64_t begin, int64_t end) {
  begin = std::clamp<int64_t>(begin, 0, static_cast<int64_t>(v.size()));
  end = std::clamp<int64_t>(end, begin, static_cast<int64_t>(v.size()));
  return std::vector<int64_t>(v.begin() + begin, v.begin() + end);
}

}  // namespace

ShardedPlan shard_batch_plan(const data::BatchPlan& global, int64_t batch_size, int64_t num_processes, int64_t rank,
                             bool split_batches, bool even_batches, bool drop_last) {
  BRISK_CHECK(num_processes >= 1 && rank >= 0 && rank < num_processes, "shard_batch_plan: rank ", rank, " of ",
              num_processes, " processes");
  BRISK_CHECK(batch_size >= 1, "shard_batch_plan: batch_size must be positive, got ", batch_size);
  const int64_t N = num_processes, nb = static_cast<int64_t>(global.size());
  ShardedPlan out;
  if (nb == 0) return out;
  if (N == 1) {  // as Accelerate: a single process's loader is left as it is
    out.batches = global;
    return out;
  }
  int64_t total = 0;
  for (const auto& b : global) total += static_cast<int64_t>(b.size());
  const bool last_short = static_cast<int64_t>(global.back().size()) < batch_size;

  if (split_batches) {
    BRISK_CHECK(batch_size % N == 0, "Accelerator: with split_batches the data loader's batch_size (", batch_size,
                ") must be a multiple of the number of processes (", N, ")");
    const int64_t L = batch_size / N;
    for (const auto& b : global) {
      if (static_cast<int64_t>(b.size()) == batch_size) out.batches.push_back(slice(b, L * rank, L * (rank + 1)));
    }
    out.last_round_size = out.last_round_real = batch_size;
    if (last_short && !drop_last) {
      const auto& b = global.back();
      if (!even_batches) {
        if (static_cast<int64_t>(b.size()) > L * rank) out.batches.push_back(slice(b, L * rank, L * (rank + 1)));
        out.last_round_size = out.last_round_real = 0;  // ranks' last batches differ in size: no padding
      } else {
        std::vector<int64_t> padded = b;
        std::vector<int64_t> initial = cycle_to(global.front(), static_cast<size_t>(batch_size));
        padded.insert(padded.end(), initial.begin(), initial.end());
        out.batches.push_back(slice(padded, L * rank, L * (rank + 1)));
        out.last_round_real = static_cast<int64_t>(b.size());
      }
    }
    return out;
  }

  data::BatchPlan plan = global;
  out.last_round_size = out.last_round_real = 0;  // 0: nothing to drop
  if (drop_last) {
    plan.resize(static_cast<size_t>(nb / N * N));
  } else if (even_batches && (last_short || nb % N != 0)) {
    std::vector<int64_t> initial;
    for (int64_t i = 0; i < std::min(N, nb); ++i)
      initial.insert(initial.end(), global[static_cast<size_t>(i)].begin(), global[static_cast<size_t>(i)].end());
    initial = cycle_to(initial, static_cast<size_t>(N * batch_size));
    int64_t cursor = 0;
    if (last_short) {
      const int64_t need = batch_size - static_cast<int64_t>(plan.back().size());
      auto fill = slice(initial, cursor, cursor + need);
      plan.back().insert(plan.back().end(), fill.begin(), fill.end());
      cursor += need;
    }
    while (static_cast<int64_t>(plan.size()) % N != 0) {
      plan.push_back(slice(initial, cursor, cursor + batch_size));
      cursor += batch_size;
    }
    const int64_t rounds = static_cast<int64_t>(plan.size()) / N;
    out.last_round_size = N * batch_size;
    out.last_round_real = total - (rounds - 1) * N * batch_size;
  }
  for (size_t i = static_cast<size_t>(rank); i < plan.size(); i += static_cast<size_t>(N))
    out.batches.push_back(std::move(plan[i]));
  return out;
}

namespace detail {

IterableShard::IterableShard(std::shared_ptr<data::IterableDataset> source, int64_t round_size, int64_t per_rank,
                             int64_t rank, bool drop_last)
    : source_(std::move(source)), round_size_(round_size), per_rank_(per_rank), rank_(rank), drop_last_(drop_last) {}

std::vector<data::Example> IterableShard::read_round(bool* complete) {
  std::vector<data::Example> round;
  while (static_cast<int64_t>(round.size()) < round_size_) {
    std::optional<data::Example> e = source_->next();
    if (!e) break;
    round.push_back(std::move(*e));
  }
  *complete = static_cast<int64_t>(round.size()) == round_size_;
  return round;
}

// Moves the look-ahead round into place and reads the next one (padded or dropped when short).
void IterableShard::advance() {
  cur_ = std::move(next_);
  has_cur_ = has_next_;
  cur_real_ = next_real_;
  bool complete = false;
  next_ = read_round(&complete);
  next_real_ = static_cast<int64_t>(next_.size());
  has_next_ = !next_.empty() && (complete || !drop_last_);
  if (has_next_ && first_.empty()) first_ = next_;
  if (has_next_ && !complete) {
    const std::vector<data::Example> pad = first_;
    while (static_cast<int64_t>(next_.size()) < round_size_) next_.insert(next_.end(), pad.begin(), pad.end());
  }
  if (!has_next_) next_.clear();
  cursor_ = rank_ * per_rank_;
}

void IterableShard::reset(uint64_t epoch) {
  source_->reset(epoch);
  ++resets_;
  if (on_reset) on_reset();
  first_.clear();
  has_next_ = false;
  advance();  // reads the first round into next_
  advance();  // current = first round, next_ = the second
}

std::optional<data::Example> IterableShard::next() {
  if (!has_cur_) return std::nullopt;
  if (cursor_ == (rank_ + 1) * per_rank_) {
    advance();
    if (!has_cur_) return std::nullopt;
  }
  return cur_[static_cast<size_t>(cursor_++)];
}

bool IterableShard::at_end() const {
  return !has_cur_ || (!has_next_ && cursor_ == (rank_ + 1) * per_rank_);
}

}  // namespace detail

}  // namespace brisk::accelerate
