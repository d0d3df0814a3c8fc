// BertTokenizer's encoding and decoding: special tokens split out of the text, the normalizer and
// pre-tokenizer (bert_text.cpp), greedy longest-match-first WordPiece, truncation and the
// template as Hugging Face tokenizers does them, padding, and the WordPiece decoder.
#include <algorithm>
#include <array>

#include "bert_tokenizer_impl.h"
#include "brisk/util/error.h"

namespace brisk::data {

namespace {

// Calls on_text(piece) and on_token(index) for the parts of `text` between and at the
// occurrences of `tokens` (sorted longest first): at each position the longest token that starts
// there, leftmost first, as tokenizers' leftmost-longest matching of added tokens.
template <typename Char, typename Contents, typename OnText, typename OnToken>
void split_on_tokens(std::basic_string_view<Char> text, const Contents& tokens, OnText on_text, OnToken on_token) {
  std::vector<Char> firsts;  // the tokens' first characters: most positions start none
  for (const auto& t : tokens)
    if (!t.empty()) firsts.push_back(t[0]);
  std::sort(firsts.begin(), firsts.end());
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    if (!std::binary_search(firsts.begin(), firsts.end(), text[i])) {
      ++i;
      continue;
    }
    size_t found = tokens.size();
    for (size_t k = 0; k < tokens.size(); ++k) {
      const auto& t = tokens[k];
      if (!t.empty() && text.substr(i).starts_with(t)) {
        found = k;
        break;  // longest first: the first that matches is the longest
      }
    }
    if (found == tokens.size()) {
      ++i;
      continue;
    }
    if (i > start) on_text(text.substr(start, i - start));
    on_token(found);
    i += tokens[found].size();
    start = i;
  }
  if (start < text.size()) on_text(text.substr(start));
}

// Python's str.replace: every non-overlapping occurrence, left to right.
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = s.find(from, pos)) != std::string::npos; pos = at + from.size()) {
    out.append(s, pos, at - pos);
    out.append(to);
  }
  if (pos == 0) return;
  out.append(s, pos);
  s = std::move(out);
}

// tokenizers' WordPiece decoder clean-up, applied to each token after its space is added.
void decoder_cleanup(std::string& t) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kRules = {{
      {" .", "."},
      {" ?", "?"},
      {" !", "!"},
      {" ,", ","},
      {" ' ", "'"},
      {" n't", "n't"},
      {" 'm", "'m"},
      {" do not", " don't"},
      {" 's", "'s"},
      {" 've", "'ve"},
      {" 're", "'re"},
  }};
  for (const auto& [from, to] : kRules) replace_all(t, from, to);
}

// transformers' clean_up_tokenization, applied to the whole decoded text.
void clean_up_tokenization(std::string& s) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRules = {{
      {" .", "."},
      {" ?", "?"},
      {" !", "!"},
      {" ,", ","},
      {" ' ", "'"},
      {" n't", "n't"},
      {" 'm", "'m"},
      {" 's", "'s"},
      {" 've", "'ve"},
      {" 're", "'re"},
  }};
  for (const auto& [from, to] : kRules) replace_all(s, from, to);
}

int64_t round_up(int64_t n, int64_t multiple) {
  if (multiple <= 1 || n % multiple == 0) return n;
  return n + multiple - n % multiple;
}

// tokenizers' truncate_encodings: `budget` tokens for the texts, special tokens already taken off.
void truncate(std::vector<int32_t>& a, std::vector<int32_t>* b, size_t budget, Truncation strategy) {
  if (budget == 0) {  // only the special tokens fit
    a.clear();
    if (b) b->clear();
    return;
  }
  const size_t total = a.size() + (b ? b->size() : 0);
  if (total <= budget) return;
  const size_t to_remove = total - budget;
  if (strategy == Truncation::LongestFirst) {
    if (b == nullptr) {
      a.resize(budget);
      return;
    }
    // The shorter keeps all of itself when the longer can still have at least as much; else
    // both get half, the longer one the odd token.
    size_t n1 = a.size(), n2 = b->size();
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
      n1 = budget / 2;
      n2 = n1 + budget % 2;
    }
    if (swap) std::swap(n1, n2);
    a.resize(std::min(a.size(), n1));
    b->resize(std::min(b->size(), n2));
    return;
  }
  BRISK_CHECK(strategy == Truncation::OnlyFirst || b != nullptr,
              "BertTokenizer: truncation only_second needs a second text (encode_pair), and there is none");
  std::vector<int32_t>& target = strategy == Truncation::OnlyFirst ? a : *b;
  BRISK_CHECK(target.size() > to_remove, "BertTokenizer: truncation ", truncation_name(strategy), " must remove ",
              to_remove, " tokens from the ", strategy == Truncation::OnlyFirst ? "first" : "second",
              " text, which has ", target.size(), ": raise max_length or use longest_first");
  target.resize(target.size() - to_remove);
}

}  // namespace

// --- encoding -----------------------------------------------------------------------------------

namespace {

// Greedy longest-match-first WordPiece of one word; the whole word is [UNK] when a part has no
// piece or the word is longer than max_input_chars_per_word.
void wordpiece(const BertTokenizer::Impl& m, std::u32string_view word, std::vector<int32_t>& out) {
  if (static_cast<int64_t>(word.size()) > m.options.max_input_chars_per_word) {
    out.push_back(m.unk_id);
    return;
  }
  std::string utf8;
  std::vector<size_t> at;  // byte offset of each character, and of the end
  at.reserve(word.size() + 1);
  for (char32_t c : word) {
    at.push_back(utf8.size());
    bert::append_utf8(utf8, c);
  }
  at.push_back(utf8.size());
  const size_t n = word.size(), before = out.size();
  const std::string& prefix = m.options.continuing_subword_prefix;
  std::string piece;
  for (size_t start = 0; start < n;) {
    int32_t id = -1;
    size_t end = std::min(n, start + m.max_piece_chars);
    for (; end > start; --end) {
      piece.clear();
      if (start > 0) piece = prefix;
      piece.append(utf8, at[start], at[end] - at[start]);
      auto it = m.vocab.find(std::string_view(piece));
      if (it != m.vocab.end()) {
        id = it->second;
        break;
      }
    }
    if (id < 0) {
      out.resize(before);
      out.push_back(m.unk_id);
      return;
    }
    out.push_back(id);
    start = end;
  }
}

void encode_normalized(const BertTokenizer::Impl& m, std::u32string_view text, std::vector<int32_t>& out) {
  for (auto [b, e] : bert::pre_tokenize(text)) wordpiece(m, text.substr(b, e - b), out);
}

}  // namespace

std::vector<int32_t> BertTokenizer::Impl::encode_text(std::string_view text) const {
  std::vector<int32_t> out;
  auto on_raw_text = [&](std::string_view piece) {
    std::u32string cps = bert::decode_utf8(piece);
    if (has_normalizer) cps = bert::normalize(cps, flags);
    if (normalized_added.empty()) {
      encode_normalized(*this, cps, out);
      return;
    }
    split_on_tokens<char32_t>(
        cps, normalized_added, [&](std::u32string_view p) { encode_normalized(*this, p, out); },
        [&](size_t k) { out.push_back(normalized_added_ids[k]); });
  };
  if (raw_added.empty()) {
    on_raw_text(text);
  } else {
    split_on_tokens<char>(text, raw_added, on_raw_text, [&](size_t k) { out.push_back(raw_added_ids[k]); });
  }
  return out;
}

size_t BertTokenizer::Impl::template_specials(bool is_pair) const {
  if (!has_template) return 0;
  size_t n = 0;
  for (const TemplatePiece& p : is_pair ? pair : single) n += p.ids.size();
  return n;
}

int64_t BertTokenizer::Impl::resolve_max_length(const EncodeOptions& o, const char* who) const {
  BRISK_CHECK(o.max_length >= 0, "BertTokenizer::", who, ": max_length ", o.max_length, " is negative");
  if (o.max_length > 0) return o.max_length;
  BRISK_CHECK(
      options.model_max_length > 0, "BertTokenizer::", who,
      ": truncation or padding to max_length needs a length: set EncodeOptions::max_length (the tokenizer from '",
      source, "' has no model_max_length)");
  return options.model_max_length;
}

Encoding BertTokenizer::Impl::build(std::vector<int32_t> a, const std::vector<int32_t>* b_in,
                                    const EncodeOptions& o) const {
  std::vector<int32_t> b_copy;
  std::vector<int32_t>* b = nullptr;
  if (b_in != nullptr) {
    b_copy = *b_in;
    b = &b_copy;
  }
  const bool is_pair = b != nullptr;
  if (o.truncation != Truncation::None) {
    const int64_t max_length = resolve_max_length(o, "encode");
    const int64_t specials = o.add_special_tokens ? static_cast<int64_t>(template_specials(is_pair)) : 0;
    BRISK_CHECK(max_length >= specials, "BertTokenizer::encode: max_length ", max_length, " is less than the ",
                specials, " special tokens a ", is_pair ? "pair" : "single text", " takes");
    truncate(a, b, static_cast<size_t>(max_length - specials), o.truncation);
  }
  Encoding e;
  auto append = [&](const std::vector<int32_t>& ids, int32_t type_id, int32_t special) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
    e.token_type_ids.insert(e.token_type_ids.end(), ids.size(), type_id);
    e.attention_mask.insert(e.attention_mask.end(), ids.size(), 1);
    e.special_tokens_mask.insert(e.special_tokens_mask.end(), ids.size(), special);
  };
  if (!has_template) {
    append(a, 0, 0);
    if (b) append(*b, 1, 0);
    return e;
  }
  for (const TemplatePiece& p : is_pair ? pair : single) {
    if (p.sequence < 0) {
      if (o.add_special_tokens) append(p.ids, p.type_id, 1);
    } else {
      append(p.sequence == 0 ? a : *b, p.type_id, 0);
    }
  }
  return e;
}

void BertTokenizer::Impl::pad(Encoding& e, int64_t length) const {
  if (static_cast<int64_t>(e.size()) >= length) return;
  BRISK_CHECK(pad_id >= 0, "BertTokenizer: padding needs the pad token '", options.pad_token,
              "', which the vocabulary from '", source, "' does not have");
  const size_t n = static_cast<size_t>(length) - e.size();
  e.input_ids.insert(e.input_ids.end(), n, pad_id);
  e.token_type_ids.insert(e.token_type_ids.end(), n, 0);
  e.attention_mask.insert(e.attention_mask.end(), n, 0);
  e.special_tokens_mask.insert(e.special_tokens_mask.end(), n, 1);
}

namespace {

std::vector<Encoding> encode_many(const BertTokenizer::Impl& m, std::span<const std::string> texts,
                                  const std::span<const std::string>* pairs, const EncodeOptions& o) {
  BRISK_CHECK(pairs == nullptr || pairs->size() == texts.size(), "BertTokenizer::encode_batch: ", texts.size(),
              " texts but ", pairs ? pairs->size() : 0, " second texts; they go in pairs");
  std::vector<Encoding> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> a = m.encode_text(texts[i]);
    if (pairs) {
      std::vector<int32_t> b = m.encode_text((*pairs)[i]);
      out.push_back(m.build(std::move(a), &b, o));
    } else {
      out.push_back(m.build(std::move(a), nullptr, o));
    }
  }
  if (o.padding == Padding::None) return out;
  BRISK_CHECK(o.pad_to_multiple_of >= 0, "BertTokenizer::encode: pad_to_multiple_of ", o.pad_to_multiple_of,
              " is negative");
  int64_t length = 0;
  if (o.padding == Padding::MaxLength) {
    length = m.resolve_max_length(o, "encode");
  } else {
    for (const Encoding& e : out) length = std::max(length, static_cast<int64_t>(e.size()));
  }
  length = round_up(length, o.pad_to_multiple_of);
  for (Encoding& e : out) m.pad(e, length);
  return out;
}

}  // namespace

std::vector<int32_t> BertTokenizer::encode(std::string_view text) const {
  return impl_->encode_text(text);
}

Encoding BertTokenizer::encode_plus(std::string_view text, const EncodeOptions& options) const {
  const std::string t(text);
  return std::move(encode_many(*impl_, std::span<const std::string>(&t, 1), nullptr, options)[0]);
}

Encoding BertTokenizer::encode_pair(std::string_view text, std::string_view text_pair,
                                    const EncodeOptions& options) const {
  const std::string a(text), b(text_pair);
  const std::span<const std::string> pairs(&b, 1);
  return std::move(encode_many(*impl_, std::span<const std::string>(&a, 1), &pairs, options)[0]);
}

std::vector<Encoding> BertTokenizer::encode_batch(std::span<const std::string> texts,
                                                  const EncodeOptions& options) const {
  return encode_many(*impl_, texts, nullptr, options);
}

std::vector<Encoding> BertTokenizer::encode_batch(std::span<const std::string> texts,
                                                  std::span<const std::string> text_pairs,
                                                  const EncodeOptions& options) const {
  return encode_many(*impl_, texts, &text_pairs, options);
}

BatchEncoding BertTokenizer::encode_batch_tensors(std::span<const std::string> texts,
                                                  const EncodeOptions& options) const {
  return to_tensors(encode_batch(texts, options));
}

BatchEncoding BertTokenizer::encode_batch_tensors(std::span<const std::string> texts,
                                                  std::span<const std::string> text_pairs,
                                                  const EncodeOptions& options) const {
  return to_tensors(encode_batch(texts, text_pairs, options));
}

BatchEncoding BertTokenizer::to_tensors(std::span<const Encoding> encodings) {
  BRISK_CHECK(!encodings.empty(), "BertTokenizer::to_tensors: no encodings");
  const size_t length = encodings[0].size();
  for (size_t i = 0; i < encodings.size(); ++i)
    BRISK_CHECK(encodings[i].size() == length, "BertTokenizer::to_tensors: encoding ", i, " has ", encodings[i].size(),
                " tokens but encoding 0 has ", length,
                ": tensors need one length (pad with Padding::Longest, or truncate and pad to max_length)");
  const auto B = static_cast<int64_t>(encodings.size()), T = static_cast<int64_t>(length);
  std::vector<int64_t> ids, types, mask;
  ids.reserve(static_cast<size_t>(B * T));
  types.reserve(ids.capacity());
  mask.reserve(ids.capacity());
  for (const Encoding& e : encodings) {
    ids.insert(ids.end(), e.input_ids.begin(), e.input_ids.end());
    types.insert(types.end(), e.token_type_ids.begin(), e.token_type_ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
  }
  return {from_vector(ids, {B, T}), from_vector(types, {B, T}), from_vector(mask, {B, T})};
}

// --- decoding ----------------------------------------------------------------------------------

std::string BertTokenizer::decode(std::span<const int32_t> ids) const {
  return decode(ids, DecodeOptions{});
}

std::string BertTokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  const Impl& m = *impl_;
  std::string out;
  size_t kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    BRISK_CHECK(id >= 0 && id < vocab_size(), "BertTokenizer::decode: token id ", id, " at position ", i,
                " is out of range [0, ", vocab_size(), ")");
    if (options.skip_special_tokens && m.special[static_cast<size_t>(id)]) continue;
    const std::string& token = m.tokens[static_cast<size_t>(id)];
    if (!m.has_decoder) {
      if (kept++ > 0) out += ' ';
      out += token;
      continue;
    }
    std::string piece;
    if (kept++ == 0) {
      piece = token;
    } else if (token.starts_with(m.options.continuing_subword_prefix)) {
      piece = token.substr(m.options.continuing_subword_prefix.size());
    } else {
      piece = " " + token;
    }
    if (m.decoder_cleanup) decoder_cleanup(piece);
    out += piece;
  }
  if (options.clean_up_tokenization_spaces.value_or(m.options.clean_up_tokenization_spaces)) clean_up_tokenization(out);
  return out;
}

std::vector<std::string> BertTokenizer::convert_ids_to_tokens(std::span<const int32_t> ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(id_to_token(id));
  return out;
}

// --- the steps and accessors -------------------------------------------------------------------

std::string BertTokenizer::normalize(std::string_view text) const {
  std::u32string cps = bert::decode_utf8(text);
  if (impl_->has_normalizer) cps = bert::normalize(cps, impl_->flags);
  return bert::encode_utf8(cps);
}

std::vector<std::string> BertTokenizer::pre_tokenize(std::string_view text) const {
  std::u32string cps = bert::decode_utf8(text);
  if (impl_->has_normalizer) cps = bert::normalize(cps, impl_->flags);
  std::vector<std::string> out;
  for (auto [b, e] : bert::pre_tokenize(cps))
    out.push_back(bert::encode_utf8(std::u32string_view(cps).substr(b, e - b)));
  return out;
}

std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  return convert_ids_to_tokens(encode(text));
}

int32_t BertTokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->vocab.find(token);
  if (it != impl_->vocab.end()) return it->second;
  for (const AddedToken& t : impl_->added)
    if (t.content == token) return t.id;
  return -1;
}

const std::string& BertTokenizer::id_to_token(int32_t id) const {
  BRISK_CHECK(id >= 0 && id < vocab_size(), "BertTokenizer::id_to_token: token id ", id, " is out of range [0, ",
              vocab_size(), ")");
  return impl_->tokens[static_cast<size_t>(id)];
}

int64_t BertTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->tokens.size());
}

std::string BertTokenizer::name() const {
  return "bert-wordpiece(" + std::to_string(vocab_size()) + ", " +
         (impl_->has_normalizer && impl_->flags.lowercase ? "uncased" : "cased") + ")";
}

int32_t BertTokenizer::unk_token_id() const {
  return impl_->unk_id;
}
int32_t BertTokenizer::cls_token_id() const {
  return impl_->cls_id;
}
int32_t BertTokenizer::sep_token_id() const {
  return impl_->sep_id;
}
int32_t BertTokenizer::pad_token_id() const {
  return impl_->pad_id;
}
int32_t BertTokenizer::mask_token_id() const {
  return impl_->mask_id;
}

bool BertTokenizer::is_special_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[static_cast<size_t>(id)] != 0;
}

int64_t BertTokenizer::num_special_tokens_to_add(bool pair) const {
  return static_cast<int64_t>(impl_->template_specials(pair));
}

int64_t BertTokenizer::model_max_length() const {
  return impl_->options.model_max_length;
}

BertNormalization BertTokenizer::normalization() const {
  const bert::NormalizerFlags& f = impl_->flags;
  if (!impl_->has_normalizer)
    return {.clean_text = false, .handle_chinese_chars = false, .strip_accents = false, .lowercase = false};
  return {.clean_text = f.clean_text,
          .handle_chinese_chars = f.handle_chinese_chars,
          .strip_accents = f.strip_accents,
          .lowercase = f.lowercase};
}

const BertTokenizerOptions& BertTokenizer::options() const {
  return impl_->options;
}

const char* BertTokenizer::unicode_version() {
  return bert::unicode_version();
}

Truncation parse_truncation(std::string_view name) {
  if (name == "longest_first" || name == "true") return Truncation::LongestFirst;
  if (name == "only_first") return Truncation::OnlyFirst;
  if (name == "only_second") return Truncation::OnlySecond;
  if (name == "do_not_truncate" || name == "false") return Truncation::None;
  BRISK_THROW("truncation '", name, "' is not one of longest_first, only_first, only_second, do_not_truncate");
}

const char* truncation_name(Truncation t) {
  switch (t) {
    case Truncation::None:
      return "do_not_truncate";
    case Truncation::LongestFirst:
      return "longest_first";
    case Truncation::OnlyFirst:
      return "only_first";
    case Truncation::OnlySecond:
      return "only_second";
  }
  return "?";
}

Padding parse_padding(std::string_view name) {
  if (name == "longest" || name == "true") return Padding::Longest;
  if (name == "max_length") return Padding::MaxLength;
  if (name == "do_not_pad" || name == "false") return Padding::None;
  BRISK_THROW("padding '", name, "' is not one of longest, max_length, do_not_pad");
}

const char* padding_name(Padding p) {
  switch (p) {
    case Padding::None:
      return "do_not_pad";
    case Padding::Longest:
      return "longest";
    case Padding::MaxLength:
      return "max_length";
  }
  return "?";
}

}  // namespace brisk::data
