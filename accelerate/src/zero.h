// Internal: ZeRO stages 1 and 2 for one prepared optimizer (docs/sharding.md).
//
// Layout: each parameter group's parameters (reverse registration order, as the Reducer) are
// packed into buckets of at most bucket_cap_mb; a bucket's flat size is padded to a multiple of the
// world size N, and rank r owns block r of every bucket. The rank's blocks of a group, one after
// the other, form one flat "shard" tensor that replaces the group's parameters in the user's
// optimizer (Optimizer::replace_params), so its state is allocated for 1/N of the elements.
//
// A synced step: the gradients are reduce-scattered (averaged) bucket by bucket into the shard's
// gradient (zero2: each bucket as soon as its last gradient is final, from the gradient hooks,
// during backward; zero1: every bucket after backward), and the model's full gradients are dropped.
// The optimizer steps the shard (the rank's slice of the current parameters is copied in first),
// then the shards are all-gathered back into the model's parameters, which every rank holds whole.
//
// zero3 (the model given): the buckets are the model's units (the wrap policy: by default each
// direct child module holding parameters, nn::Embedding children excepted, plus a root unit of the
// rest), one bucket per unit and optimizer group. Each bucket's parameters become views of one
// flat padded buffer whose bytes are released between uses: the shard is the only persistent copy.
// A unit's forward pre-hook all-gathers its buffers, its forward hook releases them, its backward
// hook (the gradient of its output known) gathers them again, and once every parameter of the unit
// has its final gradient they are released (the reduce-scatter of the gradients as zero2's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "brisk/core/enums.h"
#include "brisk/core/tensor.h"
#include "brisk/dist/process_group.h"
#include "brisk/nn/module.h"
#include "brisk/optim/optimizer.h"

namespace brisk::accelerate::detail {

// The shard layout of one engine (what a checkpoint records so that the state can be re-sliced
// for another number of processes): per bucket its group, its parameters (global indices in the
// optimizer's registration order, as its unsharded state dict numbers them) with their sizes, one
// after the other from offset 0, and its size padded to a multiple of num_processes. Rank r's
// shard of group g is block r (padded / num_processes elements) of each of g's buckets, in order.
struct ZeroLayout {
  struct Member {
    size_t param = 0;
    int64_t numel = 0;
  };
  struct Bucket {
    size_t group = 0;
    std::vector<Member> members;
    int64_t padded = 0;
  };
  int num_processes = 1;
  std::vector<size_t> group_params;  // parameters per group
  std::vector<Bucket> buckets;
  // The number of elements of a group's shard (at least 1: an empty shard holds one element).
  int64_t shard_numel(size_t group) const;
};

class ZeroEngine {
 public:
  // zero3 needs `model` (the module the optimizer's parameters belong to) and takes `wrap`: the
  // names (as named_modules gives them) of the unit modules, {"*"} for every module that holds
  // parameters itself, empty for the default policy.
  ZeroEngine(Sharding stage, optim::Optimizer& opt, dist::ProcessGroup& pg, double bucket_cap_mb,
             nn::Module* model = nullptr, const std::vector<std::string>& wrap = {});
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  // Called by Accelerator::backward around the backward pass of a micro-step: with sync, the
  // gradients are reduce-scattered (zero2 from the hooks; zero1 in end_backward); without, they
  // accumulate locally in the parameters' gradients.
  void begin_backward(bool sync);
  void end_backward();
  // Around the optimizer's update: the rank's slice of the parameters into the shards, and the
  // updated shards all-gathered back into the parameters.
  void before_step();
  void after_step();

  // zero3: every unit's parameters gathered (collective: every rank calls it) / written back into
  // the shards (this rank's slice of the current parameters) and released. No-ops for zero1/2.
  void gather_all();
  void scatter_and_release_all();
  bool shards_parameters() const;
  // zero3: the units, as "name: N parameters, M elements" lines (for docs and tests).
  std::vector<std::string> describe_units() const;
  // zero3: the largest unit's gathered bytes.
  int64_t largest_unit_bytes() const;

  // Whether `p` is one of the parameters this engine shards.
  bool owns(const Tensor& p) const;
  // The shards' gradients that are defined (for clipping and unscaling).
  std::vector<Tensor> shard_grads() const;
  // The full (unpadded) number of elements sharded, and the padded total over the buckets.
  int64_t numel() const;
  int64_t padded_numel() const;
  optim::Optimizer& optimizer() const;
  // The layout, and the parameters it shards (the optimizer's own before they were replaced).
  ZeroLayout layout() const;
  const std::vector<Tensor>& params() const;
  // zero3: this rank's block of each bucket (in layout()'s order; padded / num_processes elements
  // each), views of the shards that hold the parameters: what a checkpoint saves per rank, and
  // what load_state copies a saved block into. Nothing is gathered.
  std::vector<Tensor> shard_blocks() const;
  // zero3: the units gathered now (inside a full_parameters guard) written back into this rank's
  // shards, staying gathered (local: no collective), so that shard_blocks() holds edits made by hand.
  void scatter_gathered() const;
  // zero3: the units gathered now all-gathered again from the shards (collective: every rank,
  // whose gathered units are the same), after the shards were written (load_state).
  void refresh_gathered() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // the hooks hold weak references
};

}  // namespace brisk::accelerate::detail
