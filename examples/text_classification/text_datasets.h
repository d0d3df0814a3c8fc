// Encoded texts as the Trainer's datasets. The Trainer hands a model one tensor per batch, so an
// example's data is BERT's three inputs stacked: (3, T) int64 rows input_ids, token_type_ids,
// attention_mask. A batch is padded to its longest text (as transformers' DataCollatorWithPadding),
// not to --max_seq_length, so short quotes cost short sequences.
#pragma once
#include <brisk/brisk.h>
#include <brisk/data/bert_tokenizer.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace text_data {

// The tokenizer's encodings of `texts`, truncated to max_length tokens ([CLS] and [SEP] included),
// unpadded.
std::vector<brisk::data::Encoding> encode(const brisk::data::BertTokenizer& tokenizer,
                                          std::span<const std::string> texts, int64_t max_length);

// Encodings padded to the longest: (B, 3, T) int64 (pad_id, type 0, mask 0 after each text's end).
brisk::Tensor pad_rows(std::span<const brisk::data::Encoding* const> encodings, int32_t pad_id);

// A model's three inputs from the (B, 3, T) rows.
struct BertInputs {
  brisk::Tensor input_ids, token_type_ids, attention_mask;
};
BertInputs unpack_rows(const brisk::Tensor& rows);

// Texts with labels: data (3, T), target the label (int64 scalar).
class LabelledTexts : public brisk::data::Dataset {
 public:
  LabelledTexts(std::vector<brisk::data::Encoding> encodings, std::vector<int64_t> labels, int32_t pad_id);
  int64_t size() const override { return static_cast<int64_t>(encodings_.size()); }
  brisk::data::Example get(int64_t index) const override;
  brisk::data::Batch get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::vector<brisk::data::Encoding> encodings_;
  std::vector<int64_t> labels_;
  int32_t pad_id_;
};

// What masked-language-model batches need from the tokenizer.
struct MaskingOptions {
  double probability = 0.15;  // of the tokens that are not special: chosen for prediction
  int32_t mask_id = 0;        // [MASK]
  int32_t pad_id = 0;
  int64_t vocab_size = 0;  // random replacements are drawn from [0, vocab_size)
  uint64_t seed = 0;
  bool fixed = false;  // the same masks every epoch (a validation set's)
};

// Texts for masked-language modelling: BERT's recipe (transformers' DataCollatorForLanguageModeling):
// each token that is not special is chosen with probability 0.15; a chosen token becomes [MASK] 80%
// of the time, a random token 10%, and stays itself 10%. A text with no chosen token gets one (so
// every sample has a loss). The draws come from (seed, epoch, index) alone: the same masks on every
// machine and process. Only the chosen positions are scored, so a batch says which they are: data
// (B, 4, T) has a fourth row, the chosen positions in order then -1; target (B, K) holds their
// original ids (K: the most chosen in one text of the batch), -100 where a text has fewer.
class MaskedTexts : public brisk::data::Dataset {
 public:
  MaskedTexts(std::vector<brisk::data::Encoding> encodings, MaskingOptions options);
  int64_t size() const override { return static_cast<int64_t>(encodings_.size()); }
  brisk::data::Example get(int64_t index) const override;
  brisk::data::Batch get_batch(const std::vector<int64_t>& indices) const override;
  void set_epoch(uint64_t epoch) override { epoch_ = epoch; }

 private:
  std::vector<brisk::data::Encoding> encodings_;
  MaskingOptions options_;
  std::atomic<uint64_t> epoch_{0};
};

// The rows of the hidden states (B * T, hidden) that MaskedTexts' chosen positions select, in
// target order: (B * K) int64 on `device` (a text's unused slots select its position 0, and their
// target is -100), and K.
std::pair<brisk::Tensor, int64_t> chosen_rows(const brisk::Tensor& rows, brisk::Device device);

}  // namespace text_data
