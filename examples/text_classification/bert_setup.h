// What text_classification's two modes share: where the model and tokenizer come from (transformers'
// --model_name_or_path / --config_name / --tokenizer_name, or a preset and a vocabulary learned from
// the training text), and the modules that feed the Trainer's one-tensor batches to BERT.
#pragma once
#include <brisk/accelerate/trainer.h>
#include <brisk/brisk.h>

#include <functional>

#include <cstdint>
#include <span>
#include <string>

#include "text_datasets.h"

namespace bert_setup {

struct ModelArgs {
  std::string model_name_or_path;  // a BERT folder: config.json, weights, tokenizer files
  std::string config_name;         // a folder whose config.json gives the shape (weights from scratch)
  std::string tokenizer_name;      // a folder whose tokenizer files are used
  std::string preset = "mini";     // the shape from scratch without --config_name
  std::string config_overrides;    // "hidden_size=128,num_hidden_layers=2,..." on top of either
  int64_t vocab_size = 4096;       // of a vocabulary learned from the training text
  int64_t max_seq_length = 128;    // tokens per text, [CLS] and [SEP] included
  std::string data_dir = "/usr/share/games/fortunes";
  int threads = 0;
  void add_flags(brisk::cli::Parser& parser);
  // Throws naming the flag and its value: a folder flag that is not a folder, an unknown preset,
  // negative threads.
  void validate() const;
};

// The tokenizer: --tokenizer_name's, else --model_name_or_path's, else learned from `texts` (then
// `how` says so, with its size).
brisk::data::BertTokenizer tokenizer_for(const ModelArgs& args, std::span<const std::string> texts, std::string& how);

// The config of a model built from scratch: --config_name's, else the preset's, with the overrides,
// and vocab_size the tokenizer's (a config whose vocabulary is smaller than the tokenizer's throws).
brisk::models::BertConfig config_from_scratch(const ModelArgs& args, const brisk::data::BertTokenizer& tokenizer);

// "key=value,..." into the config's fields (sizes, dropout rates, initializer_range, layer_norm_eps);
// an unknown key throws listing the known ones.
void apply_overrides(brisk::models::BertConfig& config, const std::string& overrides);

// --max_seq_length, lowered to the model's max_position_embeddings (as run_glue does; `note` says so).
int64_t max_length_for(const ModelArgs& args, const brisk::models::BertConfig& config, std::string& note);

// "2 process(es) x batch 32 on cpu, mixed precision bf16, 1 thread(s) per process".
std::string run_line(brisk::Accelerator& acc, const brisk::TrainingArguments& args);

// An on_log callback that prints each training-loss record ("step 50: loss 1.234, learning rate
// 9.6e-05") when the progress bar is off (with it, the bar shows the loss).
std::function<void(const brisk::TrainerState&, const brisk::Metrics&)> print_training_loss(
    brisk::Accelerator& acc, const brisk::TrainingArguments& args);

// The Trainer calls model(rows) with rows (B, 3, T) (text_datasets.h); these unpack them.
class ClassifierOnRows : public brisk::nn::Module {
 public:
  explicit ClassifierOnRows(brisk::models::BertForSequenceClassification& model) : model_(model) {
    register_module("model", model_);
  }
  brisk::Tensor forward(const brisk::Tensor& rows) override {
    auto in = text_data::unpack_rows(rows);
    return model_(in.input_ids, in.attention_mask, in.token_type_ids);
  }

 private:
  brisk::models::BertForSequenceClassification& model_;
};

// Logits (B, K, vocab) at MaskedTexts' chosen positions only: the head's vocabulary-sized product
// and its cross entropy skip the 85% of positions that carry no label.
class MaskedLMOnRows : public brisk::nn::Module {
 public:
  explicit MaskedLMOnRows(brisk::models::BertForMaskedLM& model) : model_(model) { register_module("model", model_); }
  brisk::Tensor forward(const brisk::Tensor& rows) override {
    auto in = text_data::unpack_rows(rows);
    auto [hidden, pooled] = model_.bert(in.input_ids, in.attention_mask, in.token_type_ids);
    const int64_t B = hidden.size(0), T = hidden.size(1), H = hidden.size(2);
    auto [index, K] = text_data::chosen_rows(rows, hidden.device());
    return model_.predictions(index_select(hidden.reshape({B * T, H}), 0, index).reshape({B, K, H}));
  }

 private:
  brisk::models::BertForMaskedLM& model_;
};

}  // namespace bert_setup
