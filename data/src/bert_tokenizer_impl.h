// BertTokenizer's state (internal to data/): the vocabulary, the special tokens split out of the
// text, the normalizer's flags and the post-processing template. bert_tokenizer.cpp encodes and
// decodes with it; bert_tokenizer_files.cpp builds it from files and writes it back.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bert_text.h"
#include "brisk/data/bert_tokenizer.h"
#include "brisk/util/json.h"

namespace brisk::data {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A token of tokenizer.json's added_tokens (BERT's special tokens): found in the text as itself.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = true;
  bool normalized = false;  // matched in the normalized text (else in the raw text)
};

// One piece of a post-processing template: a special token's ids, or sequence A (0) or B (1).
struct TemplatePiece {
  int sequence = -1;  // -1: special token
  std::vector<int32_t> ids = {};
  int32_t type_id = 0;
};

inline TemplatePiece special_piece(int32_t id, int32_t type_id) {
  return {.sequence = -1, .ids = {id}, .type_id = type_id};
}
inline TemplatePiece sequence_piece(int sequence, int32_t type_id) {
  return {.sequence = sequence, .ids = {}, .type_id = type_id};
}

struct BertTokenizer::Impl {
  std::string source;               // the file or folder it came from, for errors
  std::vector<std::string> tokens;  // id -> token, vocabulary and added tokens
  TokenIds vocab;                   // the WordPiece vocabulary: token -> id
  std::vector<uint8_t> special;     // id -> 1 for special tokens
  std::vector<AddedToken> added;    // as the file lists them
  // The added tokens to split the text at, longest first: raw ones in the text as given,
  // normalized ones (content normalized too) in the normalized text.
  std::vector<std::string> raw_added;
  std::vector<int32_t> raw_added_ids;
  std::vector<std::u32string> normalized_added;
  std::vector<int32_t> normalized_added_ids;
  BertTokenizerOptions options;
  bool has_normalizer = true;
  bert::NormalizerFlags flags;
  int32_t unk_id = -1, cls_id = -1, sep_id = -1, pad_id = -1, mask_id = -1;
  size_t max_piece_chars = 0;  // the longest vocabulary entry, in code points, prefix removed
  bool has_template = true;
  std::vector<TemplatePiece> single, pair;
  bool has_decoder = true;      // WordPiece decoder; none: tokens joined by spaces
  bool decoder_cleanup = true;  // the decoder's per-token clean-up (tokenizer.json's "cleanup")

  // The ids of `text`'s word pieces, special tokens in the text included.
  std::vector<int32_t> encode_text(std::string_view text) const;
  // Truncation and the template (not padding) for one text or a pair.
  Encoding build(std::vector<int32_t> a, const std::vector<int32_t>* b, const EncodeOptions& options) const;
  void pad(Encoding& e, int64_t length) const;
  int64_t resolve_max_length(const EncodeOptions& options, const char* who) const;
  // BERT's template: [CLS] $A [SEP], and [CLS] $A [SEP] $B:1 [SEP]:1.
  void set_bert_template(int32_t cls, int32_t sep) {
    single = {special_piece(cls, 0), sequence_piece(0, 0), special_piece(sep, 0)};
    pair = {special_piece(cls, 0), sequence_piece(0, 0), special_piece(sep, 0), sequence_piece(1, 1),
            special_piece(sep, 1)};
  }
  // The special tokens the template adds (0 without one).
  size_t template_specials(bool pair) const;
  // After loading: checks the added tokens against the vocabulary and fills special, the
  // split lists, the special token ids and max_piece_chars.
  void finish();
};

inline bert::NormalizerFlags resolve_normalization(const BertNormalization& n) {
  return {.clean_text = n.clean_text,
          .handle_chinese_chars = n.handle_chinese_chars,
          .strip_accents = n.strip_accents.value_or(n.lowercase),
          .lowercase = n.lowercase};
}

// tokenizer.json (bert_tokenizer_json.cpp): the tokenizer it describes, not yet finished; and the
// file for a tokenizer.
std::shared_ptr<BertTokenizer::Impl> parse_tokenizer_json(std::string_view text, const BertTokenizerOptions& options,
                                                          const std::string& source);
json::Value tokenizer_json(const BertTokenizer::Impl& m);

}  // namespace brisk::data
