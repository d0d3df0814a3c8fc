// Matching a Hugging Face folder's tensors to a brisk model's (private to models/): names with or
// without the base-model prefix, old LayerNorm names, Conv1D's transposed layout, tied copies,
// buffers and other heads' weights ignored; every problem found before anything is copied.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/models/pretrained.h"

namespace brisk::models::hf {

// One tensor of the model and the name transformers gives it.
struct Binding {
  std::string name{};  // relative to the base model for its tensors ("wte.weight", "encoder.layer.0..."), else full
  Tensor target{};     // brisk's tensor (filled in place)
  bool base = true;    // part of the base model: the folder may name it with the prefix ("bert.", "transformer.")
  bool transposed = false;  // stored (in, out) as GPT-2's Conv1D, the transpose of brisk's nn::Linear
  // Non-empty: the folder may lack it (a head the checkpoint's model did not have); it keeps its
  // initial value and the report lists it with this reason.
  std::string may_initialise{};
  // Initialised whatever the folder holds (a new classifier head for another num_labels); the
  // folder's tensor of that name is reported as ignored with this reason.
  std::string replace{};
};

// What is true of every model of one family (GPT-2, BERT).
struct Family {
  std::string model_class{};      // "BertForSequenceClassification": for messages
  std::string prefix{};           // "bert." / "transformer."
  bool save_with_prefix = false;  // models with a head save their base tensors under the prefix
  // A copy the folder may hold of a tied tensor: accepted when equal to it, an error otherwise.
  std::vector<std::pair<std::string, std::string>> tied{};  // (alias, the tensor it equals), canonical names
  // Why a canonical name that no binding takes may be ignored ("" for a name this family does not
  // know, which is unexpected): buffers brisk computes, other heads' weights.
  std::function<std::string(const std::string&)> ignorable{};
};

// Loads the folder's weights into the bindings' tensors (converting dtype, transposing) and
// reports what it did; every error (missing, unexpected unless allowed, shape or dtype mismatch,
// unequal tied copy, two names for one tensor) is collected and thrown as one brisk::Error before
// any tensor is written.
LoadReport load_weights(const std::string& dir, const std::vector<Binding>& bindings, const Family& family,
                        bool allow_unexpected);

// Writes the bindings' tensors into `dir` under transformers' names (the base ones prefixed when
// family.save_with_prefix), in the model's dtype, through data::save_safetensors_folder.
void save_weights(const std::string& dir, const std::vector<Binding>& bindings, const Family& family,
                  int64_t max_shard_size);

// The dtype of the bindings' tensors (they share one; torch_dtype in config.json).
DType weights_dtype(const std::vector<Binding>& bindings);

// Levenshtein distance (insertions, deletions, substitutions each 1).
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace brisk::models::hf
