// The Unicode side of BERT's tokenizer (internal to data/): UTF-8 to code points and back, the
// BertNormalizer (text cleaning, spaces around CJK ideographs, accent stripping, lower-casing) and
// the BertPreTokenizer (split on white space, punctuation isolated), as docs/bert-tokenizer.md
// describes them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brisk::data::bert {

// The code points of `s`; a byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are invalid) becomes U+FFFD, which text cleaning drops.
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view s);

bool is_whitespace(char32_t c);    // \t \n \r, or the White_Space property
bool is_control(char32_t c);       // categories Cc Cf Co Cs, less \t \n \r
bool is_punctuation(char32_t c);   // ASCII punctuation, or categories P*
bool is_chinese_char(char32_t c);  // the CJK ideograph blocks BERT spaces out
bool is_nonspacing_mark(char32_t c);
// The lower case of one code point, appended (U+0130 gives two).
void append_lowercase(std::u32string& out, char32_t c);
// Canonical decomposition (NFD) of `s`.
std::u32string nfd(std::u32string_view s);
const char* unicode_version();

struct NormalizerFlags {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;  // already resolved (BertNormalizer's null means "as lowercase")
  bool lowercase = true;
};

// BertNormalizer: cleaning, CJK spacing, accent stripping (NFD, then non-spacing marks dropped),
// lower-casing, in that order.
std::u32string normalize(std::u32string_view text, const NormalizerFlags& flags);

// BertPreTokenizer: [begin, end) spans of the words of `text`.
std::vector<std::pair<size_t, size_t>> pre_tokenize(std::u32string_view text);

}  // namespace brisk::data::bert
