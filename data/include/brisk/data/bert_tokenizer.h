// BERT's WordPiece tokenizer, reading the folders Hugging Face ships (vocab.txt, tokenizer.json,
// tokenizer_config.json) and encoding as transformers' BertTokenizerFast (Hugging Face
// `tokenizers`) does: docs/bert-tokenizer.md has the details.
//
//   auto tok = data::BertTokenizer::from_pretrained("bert-base-uncased");   // a downloaded folder
//   data::Encoding e = tok.encode_pair("How old are you?", "I am six.",
//                                      {.truncation = data::Truncation::LongestFirst, .max_length = 128});
//   // e.input_ids: [CLS] how old are you ? [SEP] i am six . [SEP]; e.token_type_ids: 0 ... 0 1 ... 1
//   std::vector<std::string> texts = {"a first text", "a second, longer text"};
//   data::BatchEncoding b = tok.encode_batch_tensors(texts, {.padding = data::Padding::Longest});
//   // b.input_ids, b.token_type_ids, b.attention_mask: I64 (2, longest)
//   std::string s = tok.decode(e.input_ids, {.skip_special_tokens = true});  // "how old are you? i am six."
//
// Text becomes tokens in four steps: special tokens written in the text ("[MASK]") are split out
// as themselves; the rest is normalized (control characters dropped, white space made spaces,
// CJK ideographs spaced out, accents stripped and lower-cased for uncased vocabularies), split at
// white space and around punctuation, and each word becomes its longest vocabulary prefix followed
// by the longest `##` continuations, or one [UNK] when some part has none or the word is longer
// than max_input_chars_per_word (100) characters.
//
// A tokenizer is immutable after loading: every method may run on many threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/data/tokens.h"

namespace brisk::data {

// How a sequence (or pair) longer than max_length is cut, as transformers' `truncation`.
enum class Truncation {
  None,          // never cut
  LongestFirst,  // cut the longer of the two (both to about half when both are long)
  OnlyFirst,     // cut only the first text (an error when that is not enough)
  OnlySecond,    // cut only the second text (an error without a second text, or when not enough)
};
// "longest_first" (or "true"), "only_first", "only_second", "do_not_truncate" (or "false");
// anything else throws, listing these.
Truncation parse_truncation(std::string_view name);
const char* truncation_name(Truncation t);

// Padding, as transformers' `padding`: with [PAD] (id pad_token_id()) on the right, token type 0
// and attention mask 0.
enum class Padding {
  None,
  Longest,    // to the longest encoding of the batch (a single encoding: itself)
  MaxLength,  // to max_length
};
// "longest" (or "true"), "max_length", "do_not_pad" (or "false").
Padding parse_padding(std::string_view name);
const char* padding_name(Padding p);

struct EncodeOptions {
  // [CLS] text [SEP], or [CLS] a [SEP] b [SEP] for a pair (the tokenizer's template).
  bool add_special_tokens = true;
  Truncation truncation = Truncation::None;
  Padding padding = Padding::None;
  // The length truncation cuts to and Padding::MaxLength pads to, special tokens included (as
  // transformers counts it). 0: the tokenizer's model_max_length; an error where it has none.
  int64_t max_length = 0;
  // Padding rounds the length up to a multiple of this (transformers' pad_to_multiple_of); 0: off.
  int64_t pad_to_multiple_of = 0;
};

// One encoded text or pair: four vectors of the same length.
struct Encoding {
  std::vector<int32_t> input_ids = {};
  std::vector<int32_t> token_type_ids = {};       // 0 for the first text and its [CLS]/[SEP], 1 for the second's
  std::vector<int32_t> attention_mask = {};       // 1 for tokens, 0 for padding
  std::vector<int32_t> special_tokens_mask = {};  // 1 for the template's [CLS]/[SEP] and for padding
  size_t size() const { return input_ids.size(); }
};

// A batch as tensors: each I64 (batch, length) on the CPU.
struct BatchEncoding {
  Tensor input_ids = {}, token_type_ids = {}, attention_mask = {};
};

struct DecodeOptions {
  // Leave out the special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]: the tokenizer's special ones).
  bool skip_special_tokens = false;
  // Remove the space before . ? ! , and in "n't", "'s", ... (transformers'
  // clean_up_tokenization). Unset: the tokenizer's setting (tokenizer_config.json's
  // clean_up_tokenization_spaces; true where it does not say).
  std::optional<bool> clean_up_tokenization_spaces = std::nullopt;
};

// The normalizer's settings: tokenizer.json's BertNormalizer, or tokenizer_config.json's
// do_lower_case / strip_accents / tokenize_chinese_chars.
struct BertNormalization {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::optional<bool> strip_accents = std::nullopt;  // unset: as `lowercase` (BERT's uncased models strip accents)
  bool lowercase = true;
};

// What a vocabulary alone does not say (vocab.txt loading; tokenizer_config.json's keys).
struct BertTokenizerOptions {
  BertNormalization normalization{};
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string mask_token = "[MASK]";
  std::string continuing_subword_prefix = "##";
  int64_t max_input_chars_per_word = 100;
  int64_t model_max_length = 0;  // 0: none
  bool clean_up_tokenization_spaces = true;
};

class BertTokenizer : public Tokenizer {
 public:
  // A Hugging Face tokenizer folder: tokenizer.json where it exists (as transformers'
  // BertTokenizerFast reads it), else vocab.txt; tokenizer_config.json, when present, gives
  // model_max_length, clean_up_tokenization_spaces and the special tokens' names, and its
  // do_lower_case / strip_accents / tokenize_chinese_chars override tokenizer.json's normalizer
  // (as transformers does). Without a config, vocab.txt is read as uncased (transformers' default).
  static BertTokenizer from_pretrained(const std::string& dir);
  // vocab.txt: one token per line, the id is the line number (from 0).
  static BertTokenizer from_vocab_file(const std::string& vocab_txt_path, const BertTokenizerOptions& options = {});
  // The tokens in id order; `source` names them in errors.
  static BertTokenizer from_vocab(std::vector<std::string> tokens, const BertTokenizerOptions& options = {},
                                  const std::string& source = "<vocabulary>");
  // A tokenizer.json (Hugging Face tokenizers' format) with a WordPiece model, a BertNormalizer (or
  // none), a BertPreTokenizer, a TemplateProcessing or BertProcessing post-processor (or none) and
  // a WordPiece decoder (or none). `options` supplies what the file does not: pad/mask token names,
  // model_max_length, clean_up_tokenization_spaces.
  static BertTokenizer from_tokenizer_json(const std::string& path, const BertTokenizerOptions& options = {});
  static BertTokenizer from_tokenizer_json_string(std::string_view json, const BertTokenizerOptions& options = {},
                                                  const std::string& source = "tokenizer.json");

  // Writes vocab.txt, tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dir`
  // (created if missing), which from_pretrained and transformers read back as this tokenizer.
  void save_pretrained(const std::string& dir) const;

  // Tokenizer: the word pieces' ids of `text`, no special tokens added (transformers'
  // tokenizer(text, add_special_tokens=False)); special tokens written in the text are kept.
  std::vector<int32_t> encode(std::string_view text) const override;
  // decode(ids, {}): special tokens kept, spaces cleaned up as the tokenizer says.
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override;
  // "bert-wordpiece(<vocab_size>, uncased|cased)".
  std::string name() const override;

  // One text, or a pair, with special tokens, truncation and padding as `options` say.
  Encoding encode_plus(std::string_view text, const EncodeOptions& options = {}) const;
  Encoding encode_pair(std::string_view text, std::string_view text_pair, const EncodeOptions& options = {}) const;
  // Many texts (or pairs: text_pairs[i] goes with texts[i]); Padding::Longest pads to the longest.
  std::vector<Encoding> encode_batch(std::span<const std::string> texts, const EncodeOptions& options = {}) const;
  std::vector<Encoding> encode_batch(std::span<const std::string> texts, std::span<const std::string> text_pairs,
                                     const EncodeOptions& options = {}) const;
  // The same as tensors; the encodings must have one length (pad, or truncate and pad).
  BatchEncoding encode_batch_tensors(std::span<const std::string> texts, const EncodeOptions& options = {}) const;
  BatchEncoding encode_batch_tensors(std::span<const std::string> texts, std::span<const std::string> text_pairs,
                                     const EncodeOptions& options = {}) const;
  // Encodings of one length as I64 tensors (batch, length); different lengths throw, naming them.
  static BatchEncoding to_tensors(std::span<const Encoding> encodings);

  // Ids back to text: word pieces joined (a `##` piece to the one before it, others after a
  // space), then the spaces cleaned up. An id outside [0, vocab_size()) throws naming it.
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options) const;
  std::vector<std::string> convert_ids_to_tokens(std::span<const int32_t> ids) const;

  // The steps, for inspection: the normalized text, its words, and its word pieces.
  std::string normalize(std::string_view text) const;
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  std::vector<std::string> tokenize(std::string_view text) const;

  // -1 when the vocabulary has no such token.
  int32_t token_to_id(std::string_view token) const;
  // Throws for an id outside [0, vocab_size()).
  const std::string& id_to_token(int32_t id) const;
  int32_t unk_token_id() const;
  int32_t cls_token_id() const;   // -1 without a [CLS] in the vocabulary
  int32_t sep_token_id() const;   // -1 without a [SEP]
  int32_t pad_token_id() const;   // -1 without a [PAD] (padding then throws)
  int32_t mask_token_id() const;  // -1 without a [MASK]
  bool is_special_token(int32_t id) const;
  // The special tokens the template adds to one text (2 for BERT) or a pair (3), or 0 without one.
  int64_t num_special_tokens_to_add(bool pair) const;
  // 0: none (tokenizer_config.json did not say, or said a number past 10^15 as transformers does).
  int64_t model_max_length() const;
  // The normalizer's settings with strip_accents resolved.
  BertNormalization normalization() const;
  const BertTokenizerOptions& options() const;
  // The Unicode version of the character tables (categories, decompositions, lower case).
  static const char* unicode_version();

  struct Impl;

 private:
  explicit BertTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace brisk::data
