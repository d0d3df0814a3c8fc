// Internal: the IterableDataset wrapper that shards a stream across ranks (Accelerate's
// IterableDatasetShard), looking one round ahead so the last batch is known when it is yielded.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "brisk/data/dataset.h"

namespace brisk::accelerate::detail {

// Reads rounds of `round_size` examples from the source (batch_size × N, or batch_size with
// split_batches) and yields this rank's slice [rank * per_rank, (rank + 1) * per_rank) of each.
// The last short round is padded by cycling the first round (dropped with drop_last).
class IterableShard : public data::IterableDataset {
 public:
  IterableShard(std::shared_ptr<data::IterableDataset> source, int64_t round_size, int64_t per_rank, int64_t rank,
                bool drop_last);
  std::optional<data::Example> next() override;
  void reset(uint64_t epoch) override;

  // True once the examples handed out so far end this rank's share of the last round.
  bool at_end() const;
  // Real (not padded) examples in the current round (the last one once at_end()), and its size.
  int64_t last_round_real() const { return cur_real_; }
  int64_t round_size() const { return round_size_; }
  uint64_t resets() const { return resets_; }
  // Called at each reset (the start of an epoch), for the Accelerator's active-loader tracking.
  std::function<void()> on_reset;

 private:
  std::vector<data::Example> read_round(bool* complete);
  void advance();

  std::shared_ptr<data::IterableDataset> source_;
  int64_t round_size_, per_rank_, rank_;
  bool drop_last_;
  std::vector<data::Example> first_, cur_, next_;
  bool has_cur_ = false, has_next_ = false;
  int64_t cur_real_ = 0, next_real_ = 0;
  int64_t cursor_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace brisk::accelerate::detail
