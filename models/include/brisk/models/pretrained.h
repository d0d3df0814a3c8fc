// What the models' from_pretrained / save_pretrained share: the load report, the model-with-report
// pair from_pretrained returns, and the save options (docs/pretrained.md).
//
//   auto [model, report] = models::BertForSequenceClassification::from_pretrained(dir, {.num_labels = 4});
//   std::cout << report;                    // what was initialised, ignored, allowed though unexpected
//   model->save_pretrained("out", {.max_shard_size = 200'000'000});
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace brisk::models {

// One tensor name a load reports, and why.
struct ReportedTensor {
  std::string name;
  std::string reason;
};

// What from_pretrained did besides loading the tensors it matched; a load that would lose or
// invent anything silently throws instead, so everything here is expected and worth printing.
struct LoadReport {
  std::string dir;
  std::vector<std::string> files;  // the weight files read
  int64_t loaded = 0;              // tensors copied from the folder
  // The model's tensors the folder did not provide, left as initialised (transformers' init): a
  // new head (another num_labels, a classifier on a pretraining checkpoint).
  std::vector<ReportedTensor> initialized;
  // The folder's tensors the model does not use, each one transformers knows: other heads'
  // weights, buffers brisk computes (causal masks, position ids), copies of tied weights.
  std::vector<ReportedTensor> ignored;
  // Tensors no model of the family has; there only because the caller passed allow_unexpected.
  std::vector<ReportedTensor> unexpected;
  // "loaded 197 tensors from DIR (model.safetensors)" and one line per reported name.
  std::string str() const;
};
std::ostream& operator<<(std::ostream& os, const LoadReport& report);

// A model read from a folder and the report of the load: `auto [model, report] = X::from_pretrained(dir)`.
template <class Model>
struct Pretrained {
  std::unique_ptr<Model> model;
  LoadReport report;
};

struct SaveOptions {
  // Weights over this many bytes are split into model-0000i-of-0000n.safetensors shards with
  // model.safetensors.index.json (transformers' default, 5 GB); <= 0: always one file.
  int64_t max_shard_size = 5'000'000'000;
};

}  // namespace brisk::models
