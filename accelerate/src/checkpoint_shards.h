// Internal: ZeRO shards in checkpoints (docs/checkpoints.md, docs/sharding.md). A sharded
// optimizer's state: its layout in state.json and re-sharding for another number of processes or
// another stage (checkpoint_optimizer_shards.cpp). zero3's parameters: each rank's blocks in a file
// of its own, and the full parameters rebuilt from them (checkpoint_param_shards.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/nn/module.h"
#include "brisk/optim/optimizer.h"
#include "brisk/util/json.h"
#include "checkpoint_fields.h"
#include "zero.h"

namespace brisk::accelerate::detail {

// --- a sharded optimizer's state -------------------------------------------------------------------

// A sharded optimizer's layout as state.json records it: {"num_processes": N, "group_params":
// [...], "buckets": [{"group": g, "padded": n, "params": [[index, numel], ...]}, ...]}.
json::Value layout_json(const ZeroLayout& l);
// "state.<i>.<kind>" -> i (and kind); -1 when the name has another form.
int64_t state_slot(const std::string& tname, std::string* kind);
// An optimizer's state saved in another layout than this job's (another number of processes, or
// sharded where this job is not, or the other way round): gathered parameter by parameter from
// the saved layout (the whole state, or every rank's shard with its padding) and sliced for this
// job's (docs/checkpoints.md). `zero` is this job's sharding engine for the optimizer, if any.
optim::StateDict reshard_optimizer(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                   const std::string& key, const optim::Optimizer& opt, const ZeroEngine* zero,
                                   int64_t saved_world, int rank);

// --- zero3: per-rank parameter shards --------------------------------------------------------------
// Under zero3 each rank holds only its block of every bucket (a unit's parameters of one optimizer
// group, flat, padded to a multiple of N). save_state writes rank r's blocks to
// model_shard<r>.safetensors (model_<i>_shard<r> for model i), tensors "bucket.<k>", with the
// layout that rebuilds the full tensors in its metadata and in state.json's model entry:
//   {"num_processes": N, "buckets": [{"tensor": "bucket.0", "dtype": "F32", "padded": P, "shard": P/N,
//     "params": [{"name": "h0.attn.c_attn.weight", "shape": [64, 192], "offset": 0}, ...]}, ...]}
// The model file then holds the rest of the state dict (buffers, parameters no optimizer shards).

// This job's parameter shards of one model: the layout, this rank's blocks (views of the shards)
// and the names of the sharded parameters.
struct ParamShards {
  json::Value layout;
  std::vector<Tensor> blocks;
  std::set<std::string> names;
};
ParamShards param_shards(const nn::Module& model, const std::vector<const ZeroEngine*>& engines, int world);

// The zero3 engines that shard `model`'s parameters (full_parameters' choice). `optimizers`: the
// Accelerator's prepared optimizers (each with its `zero` engine, if any).
template <class Optimizers>
std::vector<const ZeroEngine*> param_engines(const Optimizers& optimizers, const nn::Module& model) {
  std::vector<const ZeroEngine*> out;
  const std::vector<Tensor> params = model.parameters();
  for (const auto& o : optimizers) {
    if (!o->zero || !o->zero->shards_parameters()) continue;
    bool mine = false;
    for (const Tensor& p : params) mine = mine || o->zero->owns(p);
    if (mine) out.push_back(o->zero.get());
  }
  return out;
}

// A model entry's parameter shards as state.json records them, checked: the layout's every value
// (names once, offsets one after the other from 0, padding below num_processes, shard = padded /
// num_processes) and, with `targets` (the prepared model's tensors), each name, shape and dtype.
struct SavedParamShards {
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;
  };
  struct Bucket {
    std::string dtype;
    int64_t padded = 0, shard = 0;
    std::vector<Param> params;
  };
  int64_t world = 1;
  std::vector<Bucket> buckets;
  std::vector<std::string> files;  // per rank
  json::Value layout;
};
SavedParamShards parse_param_shards(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                    const std::string& key, int64_t saved_world,
                                    const std::map<std::string, Tensor>* targets);
// Rank r's parameter shard file, checked against state.json's layout (its metadata: the format,
// its rank, the number of processes and the same layout; one block per bucket of the right size
// and dtype); its blocks in bucket order.
std::vector<Tensor> read_param_shard(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     int64_t r, const std::string& key);
// The full parameters rebuilt from every rank's shard file (read one at a time into the padded
// buckets), by name in the layout's order.
nn::NamedTensors gather_param_shards(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     const std::string& key);

}  // namespace brisk::accelerate::detail
