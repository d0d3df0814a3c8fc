// GPT-2's byte-level BPE tokenizer, reading the standard files that GPT-2 and Hugging Face ship
// (vocab.json: token -> id; merges.txt: one merge "a b" per line in rank order, after an optional
// "#version" line), and encoding exactly as OpenAI's encoder.py does:
//
//   1. `<|endoftext|>` in the text is the special token (when vocab.json has it), as tiktoken's
//      encode(text, allowed_special="all"): the text is split at each occurrence and the pieces
//      are encoded independently. Text can therefore not spell the string literally; a caller who
//      wants that must split it out itself.
//   2. Each piece is pre-tokenised with GPT-2's regex
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (a run of whitespace before a non-space keeps its last character for the next pre-token,
//      so " word" stays together), matched by hand on UTF-8 with Unicode letter and number tables
//      (data/src/bpe_unicode_tables.inc, from scripts/gen_unicode_tables.py) and \s = White_Space.
//      Bytes that are not valid UTF-8 do not stop anything: each counts as one character that is
//      neither letter, number nor space (as Python's surrogateescape decoding makes them).
//   3. Each pre-token's bytes start as the 256 byte tokens (the bytes_to_unicode mapping turns
//      vocab.json's strings back into bytes) and the merges are applied lowest rank first, every
//      occurrence left to right, until none applies (encoder.py's bpe()).
//
// decode() concatenates the tokens' bytes, so decode(encode(s)) == s for any bytes s.
//
//   auto tok = data::GPT2Tokenizer::from_files("gpt2/vocab.json", "gpt2/merges.txt");
//   auto same = data::GPT2Tokenizer::from_pretrained("gpt2");   // a downloaded Hugging Face folder
//   std::vector<int32_t> ids = tok.encode("Hello world");   // {15496, 995} with GPT-2's files
//   std::string text = tok.decode(ids);
//
// Errors (a missing file, malformed JSON, a bad merges line, a merge whose tokens are not in the
// vocabulary, a token id out of range in decode) throw brisk::Error naming the file, line or id.
// A tokenizer is immutable after loading: encode and decode may run on many threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brisk/data/tokens.h"

namespace brisk::data {

class GPT2Tokenizer : public Tokenizer {
 public:
  static GPT2Tokenizer from_files(const std::string& vocab_json_path, const std::string& merges_txt_path);
  // A Hugging Face GPT-2 folder: vocab.json + merges.txt where both exist, else tokenizer.json
  // (a BPE model with the ByteLevel pre-tokenizer; its model.vocab and model.merges, the merges
  // as "a b" strings or [a, b] pairs). Errors name the folder and what is missing or wrong.
  static GPT2Tokenizer from_pretrained(const std::string& dir);
  // The same from the files' contents; the names are for error messages.
  static GPT2Tokenizer from_strings(std::string_view vocab_json, std::string_view merges_txt,
                                    const std::string& vocab_name = "vocab.json",
                                    const std::string& merges_name = "merges.txt");

  std::vector<int32_t> encode(std::string_view text) const override;
  // An id outside [0, vocab_size()) throws brisk::Error naming the id and its position.
  std::string decode(std::span<const int32_t> ids) const override;
  // One more than the largest id in vocab.json (50257 for GPT-2).
  int64_t vocab_size() const override;
  // "gpt2-bpe(<vocab_size>)".
  std::string name() const override;

  // The id of `<|endoftext|>`, or -1 when the vocabulary has none.
  int32_t eot_token() const;
  int64_t num_merges() const;
  // The bytes of a token (throws for an unknown id).
  const std::string& token_bytes(int32_t id) const;

  // The pre-tokens of `text` (step 2 above, without the special token): views into `text`.
  static std::vector<std::string_view> pretokenize(std::string_view text);
  // The Unicode version of the letter/number tables.
  static const char* unicode_version();

 private:
  GPT2Tokenizer() = default;  // only from_files / from_strings make one
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace brisk::data
