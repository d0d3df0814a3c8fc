// GPT-2's byte-level BPE: loading vocab.json + merges.txt, the pre-tokenisation regex matched by
// hand on UTF-8, and encoder.py's merge loop.
#include "brisk/data/bpe.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include "bpe_pair_table.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "read_file.h"

namespace brisk::data {

using detail::MergeRule;
using detail::pair_key;
using detail::PairTable;

namespace {

struct CodePointRange {
  uint32_t lo, hi;
};
#include "bpe_unicode_tables.inc"

constexpr std::string_view kEndOfText = "<|endoftext|>";

enum class CharClass : uint8_t { Letter, Number, Space, Other };

template <size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], uint32_t cp) {
  const CodePointRange* it =
      std::upper_bound(ranges, ranges + N, cp, [](uint32_t v, const CodePointRange& r) { return v < r.lo; });
  return it != ranges && cp <= (it - 1)->hi;
}

CharClass classify(uint32_t cp) {
  if (in_ranges(kLetterRanges, cp)) return CharClass::Letter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::Number;
  if (in_ranges(kWhiteSpaceRanges, cp)) return CharClass::Space;
  return CharClass::Other;
}

// The class of every ASCII byte, computed once from the same tables.
const std::array<CharClass, 128>& ascii_classes() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = classify(c);
    return t;
  }();
  return table;
}

struct Char {
  uint32_t len;  // bytes
  CharClass cls;
};

// The character at s[i] (i < n): a valid UTF-8 sequence (no overlongs, surrogates or code points
// past U+10FFFF), or else the single byte s[i] as an `Other` character.
inline Char char_at(const unsigned char* s, size_t n, size_t i) {
  const unsigned char b0 = s[i];
  if (b0 < 0x80) return {1, ascii_classes()[b0]};
  auto cont = [&](size_t k) { return i + k < n && (s[i + k] & 0xC0) == 0x80; };
  uint32_t cp = 0, len = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) {
      cp = ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
      len = 2;
    }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (cont(1) && cont(2)) {
      const unsigned char b1 = s[i + 1];
      const bool ok = (b0 == 0xE0) ? b1 >= 0xA0 : (b0 == 0xED) ? b1 <= 0x9F : true;
      if (ok) {
        cp = ((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
        len = 3;
      }
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (cont(1) && cont(2) && cont(3)) {
      const unsigned char b1 = s[i + 1];
      const bool ok = (b0 == 0xF0) ? b1 >= 0x90 : (b0 == 0xF4) ? b1 <= 0x8F : true;
      if (ok) {
        cp = ((b0 & 0x07u) << 18) | ((b1 & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
        len = 4;
      }
    }
  }
  if (len == 0) return {1, CharClass::Other};
  return {len, classify(cp)};
}

// Where the pre-token that starts at s[i] ends: the first alternative of the regex that matches
// at i, each as the regex engine would take it.
size_t pretoken_end(const unsigned char* s, size_t n, size_t i) {
  // 's|'t|'re|'ve|'m|'ll|'d
  if (s[i] == '\'' && i + 1 < n) {
    const unsigned char c = s[i + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
    if (i + 2 < n) {
      const unsigned char d = s[i + 2];
      if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return i + 3;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
  const size_t j = s[i] == ' ' ? i + 1 : i;
  if (j < n) {
    const Char c = char_at(s, n, j);
    if (c.cls != CharClass::Space) {
      size_t k = j + c.len;
      while (k < n) {
        const Char d = char_at(s, n, k);
        if (d.cls != c.cls) break;
        k += d.len;
      }
      return k;
    }
  }
  // Here s[i] starts a run of whitespace. `\s+(?!\S)` takes it all when it reaches the end of the
  // text, else backtracks one character so that a non-space follows none (leaving the last space
  // for ` ?\p{L}+` and the like); a run of one before a non-space falls to `\s+`.
  size_t k = i, last = i;
  while (k < n) {
    const Char d = char_at(s, n, k);
    if (d.cls != CharClass::Space) break;
    last = k;
    k += d.len;
  }
  if (k == n) return n;
  return last > i ? last : k;
}

// bytes_to_unicode(): the printable bytes stand for themselves, the others for U+0100 onwards.
struct ByteAlphabet {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 512> cp_to_byte{};  // -1: not in the alphabet (every code point used is < 0x144)
  ByteAlphabet() {
    cp_to_byte.fill(-1);
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = printable[b] ? static_cast<uint32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// A vocabulary or merges string (byte-level characters, as UTF-8) back to the bytes it stands
// for; false when it is not valid UTF-8 or has a character outside the 256 of the alphabet.
bool unmap_bytes(std::string_view s, std::string& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t len;
    if (p[i] < 0x80) {
      cp = p[i];
      len = 1;
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
      cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      len = 2;
    } else {
      return false;  // every character of the alphabet is below U+0800
    }
    if (cp >= alphabet().cp_to_byte.size() || alphabet().cp_to_byte[cp] < 0 || (len == 2 && cp < 0x80)) return false;
    out.push_back(static_cast<char>(alphabet().cp_to_byte[cp]));
    i += len;
  }
  return true;
}

}  // namespace

struct GPT2Tokenizer::Impl {
  std::vector<std::string> tokens;  // id -> bytes
  std::unordered_map<std::string, int32_t> ids;
  std::array<int32_t, 256> byte_id{};
  PairTable merges;
  int64_t num_merges = 0;
  int32_t eot = -1;

  // encoder.py's bpe(): merge the adjacent pair of lowest rank, every occurrence left to right,
  // until no adjacent pair has a rank. Each round scans the word, so a word of n bytes costs up to
  // n rounds of n: long pieces (a run of 100,000 letters) go to bpe_long instead.
  void bpe(std::string_view piece, std::vector<int32_t>& word) const {
    if (piece.size() > kLongPiece) {
      bpe_long(piece, word);
      return;
    }
    word.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_id[static_cast<unsigned char>(piece[i])];
    while (word.size() > 1) {
      uint32_t best = UINT32_MAX;
      int32_t first = 0, second = 0, merged = 0;
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const MergeRule* r = merges.find(pair_key(word[i], word[i + 1]));
        if (r != nullptr && r->rank < best) {
          best = r->rank;
          first = word[i];
          second = word[i + 1];
          merged = r->merged;
        }
      }
      if (best == UINT32_MAX) break;
      size_t o = 0;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
          word[o++] = merged;
          i += 2;
        } else {
          word[o++] = word[i++];
        }
      }
      word.resize(o);
    }
  }

  static constexpr size_t kLongPiece = 64;

  // The same merges in O(n log n): the word is a linked list of symbols and a min-heap holds
  // (rank, position) for every adjacent pair that has a rank (entries go stale as symbols merge and
  // are checked when popped). Each round takes every entry of the lowest rank and merges those
  // occurrences left to right, as encoder.py's round does, then queues the pairs the merges made.
  void bpe_long(std::string_view piece, std::vector<int32_t>& word) const {
    constexpr uint32_t kNone = UINT32_MAX;
    BRISK_CHECK(piece.size() < kNone, "GPT2Tokenizer::encode: a pre-token of ", piece.size(), " bytes is too long");
    const uint32_t n = static_cast<uint32_t>(piece.size());
    std::vector<int32_t> tok(n);
    std::vector<uint32_t> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (uint32_t i = 0; i < n; ++i) {
      tok[i] = byte_id[static_cast<unsigned char>(piece[i])];
      prev[i] = i == 0 ? kNone : i - 1;
      next[i] = i + 1 == n ? kNone : i + 1;
    }
    std::vector<uint64_t> heap;  // rank << 32 | position, smallest on top
    auto push = [&](uint32_t p) {
      if (p == kNone || next[p] == kNone) return;
      if (const MergeRule* r = merges.find(pair_key(tok[p], tok[next[p]]))) {
        heap.push_back(static_cast<uint64_t>(r->rank) << 32 | p);
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    };
    for (uint32_t i = 0; i + 1 < n; ++i) push(i);
    std::vector<uint32_t> round, merged_at;
    while (!heap.empty()) {
      const uint32_t rank = static_cast<uint32_t>(heap.front() >> 32);
      round.clear();
      while (!heap.empty() && static_cast<uint32_t>(heap.front() >> 32) == rank) {
        round.push_back(static_cast<uint32_t>(heap.front()));
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        heap.pop_back();
      }
      std::sort(round.begin(), round.end());  // positions keep the word's order
      merged_at.clear();
      for (uint32_t p : round) {
        const uint32_t q = next[p];
        if (!alive[p] || q == kNone) continue;
        const MergeRule* r = merges.find(pair_key(tok[p], tok[q]));
        if (r == nullptr || r->rank != rank) continue;  // stale: one pair per rank
        tok[p] = r->merged;
        alive[q] = 0;
        next[p] = next[q];
        if (next[q] != kNone) prev[next[q]] = p;
        merged_at.push_back(p);
      }
      for (uint32_t p : merged_at) {
        push(prev[p]);
        push(p);
      }
    }
    word.clear();
    for (uint32_t p = 0; p != kNone; p = next[p]) word.push_back(tok[p]);
  }

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out,
                       std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>>& cache,
                       std::vector<int32_t>& cached, std::vector<int32_t>& word, bool use_cache) const {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
      const size_t end = pretoken_end(s, n, i);
      const std::string_view piece = text.substr(i, end - i);
      i = end;
      if (piece.size() == 1) {
        out.push_back(byte_id[static_cast<unsigned char>(piece[0])]);
        continue;
      }
      if (!use_cache) {
        bpe(piece, word);
        out.insert(out.end(), word.begin(), word.end());
        continue;
      }
      auto it = cache.find(piece);
      if (it != cache.end()) {
        out.insert(out.end(), cached.begin() + it->second.first, cached.begin() + it->second.first + it->second.second);
        continue;
      }
      bpe(piece, word);
      out.insert(out.end(), word.begin(), word.end());
      // A per-call cache of the pieces seen (text repeats its words); bounded.
      if (cache.size() >= (1u << 16) || cached.size() >= (1u << 22)) {
        cache.clear();
        cached.clear();
      }
      cache.emplace(piece, std::make_pair(static_cast<uint32_t>(cached.size()), static_cast<uint32_t>(word.size())));
      cached.insert(cached.end(), word.begin(), word.end());
    }
  }
};

GPT2Tokenizer GPT2Tokenizer::from_files(const std::string& vocab_json_path, const std::string& merges_txt_path) {
  const std::string vocab = read_whole_file(vocab_json_path, "GPT2Tokenizer (vocabulary, vocab.json)");
  const std::string merges = read_whole_file(merges_txt_path, "GPT2Tokenizer (merges, merges.txt)");
  return from_strings(vocab, merges, vocab_json_path, merges_txt_path);
}

GPT2Tokenizer GPT2Tokenizer::from_strings(std::string_view vocab_json, std::string_view merges_txt,
                                          const std::string& vocab_name, const std::string& merges_name) {
  auto impl = std::make_shared<Impl>();
  // vocab.json: one object of token -> id.
  std::vector<std::pair<std::string, int64_t>> entries;
  try {
    json::Reader r(vocab_json);
    BRISK_CHECK(r.next_type() == json::Type::Object, "json: expected an object of token -> id, got ",
                json::type_name(r.next_type()));
    r.begin_object();
    for (std::string key; r.next_key(key);) {
      const size_t at = r.key_offset();
      if (r.next_type() != json::Type::Number)
        r.fail("token " + json::quote(key) + " maps to a " + json::type_name(r.next_type()) + ", not an id", at);
      json::Value v = r.read_value();
      if (!v.is_integer() || (v.type() == json::Type::Number && v.as_double() < 0))
        r.fail("token " + json::quote(key) + " has an id that is not a non-negative integer", at);
      if (v.as_double() > static_cast<double>(INT32_MAX))
        r.fail("token " + json::quote(key) + " has an id past 2^31", at);
      entries.emplace_back(std::move(key), v.as_int());
    }
    r.finish();
  } catch (const Error& e) {
    BRISK_THROW("GPT2Tokenizer: vocabulary file '", vocab_name, "': ", e.message());
  }
  const int64_t n = static_cast<int64_t>(entries.size());
  BRISK_CHECK(n > 0, "GPT2Tokenizer: vocabulary file '", vocab_name, "' has no tokens");
  BRISK_CHECK(n <= INT32_MAX, "GPT2Tokenizer: vocabulary file '", vocab_name, "' has too many tokens (", n, ")");
  impl->tokens.resize(static_cast<size_t>(n));
  std::vector<bool> have(static_cast<size_t>(n), false);
  std::string bytes;
  for (auto& [key, id] : entries) {
    BRISK_CHECK(id < n, "GPT2Tokenizer: vocabulary file '", vocab_name, "': token ", json::quote(key), " has id ", id,
                ", outside [0, ", n, "): the ids must number the ", n, " tokens 0..", n - 1);
    BRISK_CHECK(!have[id], "GPT2Tokenizer: vocabulary file '", vocab_name, "': id ", id, " is given to two tokens (",
                json::quote(key), " and another)");
    BRISK_CHECK(unmap_bytes(key, bytes), "GPT2Tokenizer: vocabulary file '", vocab_name, "': token ", json::quote(key),
                " (id ", id, ") has a character outside GPT-2's byte alphabet");
    have[id] = true;
    const int32_t id32 = static_cast<int32_t>(id);
    BRISK_CHECK(impl->ids.emplace(bytes, id32).second, "GPT2Tokenizer: vocabulary file '", vocab_name, "': token ",
                json::quote(key), " (id ", id, ") appears twice");
    impl->tokens[id] = bytes;
    if (key == kEndOfText) impl->eot = id32;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = impl->ids.find(std::string(1, static_cast<char>(b)));
    if (it == impl->ids.end()) {
      char hex[64];
      std::snprintf(hex, sizeof hex, "0x%02X (the byte-level character U+%04X)", b, alphabet().byte_to_cp[b]);
      BRISK_THROW("GPT2Tokenizer: vocabulary file '", vocab_name, "' has no token for byte ", hex);
    }
    impl->byte_id[b] = it->second;
  }
  // merges.txt: "#version ..." (optional), then "a b" per line, rank = line order.
  size_t line_no = 0;
  std::string a_bytes, b_bytes;
  uint32_t rank = 0;
  for (size_t pos = 0; pos < merges_txt.size();) {
    size_t nl = merges_txt.find('\n', pos);
    if (nl == std::string_view::npos) nl = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t sp = line.find(' ');
    BRISK_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                    line.find(' ', sp + 1) == std::string_view::npos,
                "GPT2Tokenizer: merges file '", merges_name, "' line ", line_no,
                ": expected two tokens separated by one space, got ", json::quote(line));
    const std::string_view a = line.substr(0, sp), b = line.substr(sp + 1);
    for (auto [part, out] : {std::pair{a, &a_bytes}, std::pair{b, &b_bytes}})
      BRISK_CHECK(unmap_bytes(part, *out), "GPT2Tokenizer: merges file '", merges_name, "' line ", line_no, ": token ",
                  json::quote(part), " has a character outside GPT-2's byte alphabet");
    auto ia = impl->ids.find(a_bytes), ib = impl->ids.find(b_bytes);
    BRISK_CHECK(ia != impl->ids.end() && ib != impl->ids.end(), "GPT2Tokenizer: merges file '", merges_name, "' line ",
                line_no, ": token ", json::quote(ia == impl->ids.end() ? a : b), " is not in the vocabulary '",
                vocab_name, "'");
    auto im = impl->ids.find(a_bytes + b_bytes);
    BRISK_CHECK(im != impl->ids.end(), "GPT2Tokenizer: merges file '", merges_name, "' line ", line_no,
                ": the merged token ", json::quote(std::string(a) + std::string(b)), " is not in the vocabulary '",
                vocab_name, "'");
    BRISK_CHECK(rank < UINT32_MAX - 1, "GPT2Tokenizer: merges file '", merges_name, "' has too many merges");
    // A pair listed twice takes its last rank, as encoder.py's dict(zip(merges, range(...))) does.
    impl->merges.set(pair_key(ia->second, ib->second), MergeRule{rank++, im->second});
  }
  impl->num_merges = rank;
  GPT2Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

std::vector<int32_t> GPT2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached, word;
  const Impl& m = *impl_;
  // A short text repeats few of its words: looking them up would cost more than merging them.
  const bool use_cache = text.size() >= 4096;
  if (m.eot < 0) {
    m.encode_ordinary(text, out, cache, cached, word, use_cache);
    return out;
  }
  // The special token splits the text; each piece is pre-tokenised on its own.
  size_t pos = 0;
  for (;;) {
    const size_t at = text.find(kEndOfText, pos);
    m.encode_ordinary(text.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos), out, cache,
                      cached, word, use_cache);
    if (at == std::string_view::npos) break;
    out.push_back(m.eot);
    pos = at + kEndOfText.size();
  }
  return out;
}

std::string GPT2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  const int64_t n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    BRISK_CHECK(ids[i] >= 0 && ids[i] < n, "GPT2Tokenizer::decode: token id ", ids[i], " at position ", i,
                " is out of range [0, ", n, ")");
    out += impl_->tokens[ids[i]];
  }
  return out;
}

const std::string& GPT2Tokenizer::token_bytes(int32_t id) const {
  BRISK_CHECK(id >= 0 && id < static_cast<int64_t>(impl_->tokens.size()), "GPT2Tokenizer::token_bytes: token id ", id,
              " is out of range [0, ", impl_->tokens.size(), ")");
  return impl_->tokens[id];
}

int64_t GPT2Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->tokens.size());
}

std::string GPT2Tokenizer::name() const {
  return "gpt2-bpe(" + std::to_string(vocab_size()) + ")";
}

int32_t GPT2Tokenizer::eot_token() const {
  return impl_->eot;
}

int64_t GPT2Tokenizer::num_merges() const {
  return impl_->num_merges;
}

std::vector<std::string_view> GPT2Tokenizer::pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t end = pretoken_end(s, text.size(), i);
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

const char* GPT2Tokenizer::unicode_version() {
  return kUnicodeVersion;
}

}  // namespace brisk::data
