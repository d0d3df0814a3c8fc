// BERT's normalizer and pre-tokenizer over code points, with the Unicode tables generated from
// Python's unicodedata (bert_unicode_tables.inc, scripts/gen_bert_unicode_tables.py).
#include "bert_text.h"

#include <algorithm>
#include <array>

namespace brisk::data::bert {

namespace {

struct CodePointRange {
  uint32_t lo, hi;
};
struct CombiningClassRange {
  uint32_t lo, hi, ccc;
};
struct Decomposition {
  uint32_t cp, first, second;
};
struct LowercaseRun {
  uint32_t lo, hi;
  int32_t delta;
  uint32_t stride;
};
#include "bert_unicode_tables.inc"
#include "bpe_unicode_tables.inc"  // kWhiteSpaceRanges

template <typename R, size_t N>
const R* find_range(const R (&ranges)[N], uint32_t cp) {
  const R* it = std::upper_bound(ranges, ranges + N, cp, [](uint32_t v, const R& r) { return v < r.lo; });
  if (it == ranges) return nullptr;
  --it;
  return cp <= it->hi ? it : nullptr;
}

// Hangul syllables decompose arithmetically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(char32_t c, std::u32string& out) {
  const uint32_t cp = c;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(static_cast<char32_t>(kLBase + s / kNCount));
    out.push_back(static_cast<char32_t>(kVBase + (s % kNCount) / kTCount));
    if (s % kTCount != 0) out.push_back(static_cast<char32_t>(kTBase + s % kTCount));
    return;
  }
  const Decomposition* end = kDecompositions + std::size(kDecompositions);
  const Decomposition* d =
      std::lower_bound(kDecompositions, end, cp, [](const Decomposition& x, uint32_t v) { return x.cp < v; });
  if (d == end || d->cp != cp) {
    out.push_back(c);
    return;
  }
  decompose(static_cast<char32_t>(d->first), out);  // a mapping's parts may decompose further
  if (d->second != 0) decompose(static_cast<char32_t>(d->second), out);
}

uint32_t combining_class(char32_t c) {
  if (c < 0x300) return 0;  // the first mark with a class is U+0300
  const CombiningClassRange* r = find_range(kCombiningClassRanges, static_cast<uint32_t>(c));
  return r ? r->ccc : 0;
}

}  // namespace

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  for (size_t i = 0; i < n;) {
    const unsigned char b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF && cont(i + 1)) {
      cp = ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF && cont(i + 1) && cont(i + 2)) {
      const unsigned char b1 = s[i + 1];
      if ((b0 != 0xE0 || b1 >= 0xA0) && (b0 != 0xED || b1 <= 0x9F)) {
        cp = ((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
        len = 3;
      }
    } else if (b0 >= 0xF0 && b0 <= 0xF4 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const unsigned char b1 = s[i + 1];
      if ((b0 != 0xF0 || b1 >= 0x90) && (b0 != 0xF4 || b1 <= 0x8F)) {
        cp = ((b0 & 0x07u) << 18) | ((b1 & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
        len = 4;
      }
    }
    if (len == 0) {
      out.push_back(U'\uFFFD');
      ++i;
    } else {
      out.push_back(static_cast<char32_t>(cp));
      i += len;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  const auto cp = static_cast<uint32_t>(c);
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_whitespace(char32_t c) {
  if (c == U' ' || c == U'\t' || c == U'\n' || c == U'\r') return true;
  return c >= 0x80 && find_range(kWhiteSpaceRanges, static_cast<uint32_t>(c)) != nullptr;
}

bool is_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  return find_range(kControlRanges, static_cast<uint32_t>(c)) != nullptr;
}

bool is_punctuation(char32_t c) {
  // BERT counts every non-alphanumeric printable ASCII character as punctuation ($, +, ^, ...).
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return c >= 0x80 && find_range(kPunctuationRanges, static_cast<uint32_t>(c)) != nullptr;
}

bool is_chinese_char(char32_t c) {
  // Hugging Face tokenizers' list, which transformers' fast tokenizer uses; Google's original
  // (and transformers' slow tokenizer) starts the fifth range at 0x2B820 instead.
  const auto cp = static_cast<uint32_t>(c);
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_nonspacing_mark(char32_t c) {
  return c >= 0x300 && find_range(kNonspacingMarkRanges, static_cast<uint32_t>(c)) != nullptr;
}

void append_lowercase(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= U'A' && c <= U'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: i + COMBINING DOT ABOVE
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  const auto cp = static_cast<uint32_t>(c);
  const LowercaseRun* r = find_range(kLowercaseRuns, cp);
  if (r != nullptr && (cp - r->lo) % r->stride == 0) {
    out.push_back(static_cast<char32_t>(static_cast<int64_t>(cp) + r->delta));
  } else {
    out.push_back(c);
  }
}

std::u32string nfd(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0xC0) {
      out.push_back(c);
    } else {
      decompose(c, out);
    }
  }
  // Canonical ordering: each run of non-starters is sorted by combining class, stably.
  for (size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
                       [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

const char* unicode_version() {
  return kBertUnicodeVersion;
}

std::u32string normalize(std::u32string_view text, const NormalizerFlags& flags) {
  std::u32string s(text);
  if (flags.clean_text) {
    std::u32string cleaned;
    cleaned.reserve(s.size());
    for (char32_t c : s) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      cleaned.push_back(is_whitespace(c) ? U' ' : c);
    }
    s = std::move(cleaned);
  }
  if (flags.handle_chinese_chars) {
    std::u32string spaced;
    spaced.reserve(s.size());
    for (char32_t c : s) {
      if (is_chinese_char(c)) {
        spaced.push_back(U' ');
        spaced.push_back(c);
        spaced.push_back(U' ');
      } else {
        spaced.push_back(c);
      }
    }
    s = std::move(spaced);
  }
  if (flags.strip_accents) {
    std::u32string d = nfd(s);
    std::erase_if(d, is_nonspacing_mark);
    s = std::move(d);
  }
  if (flags.lowercase) {
    std::u32string lower;
    lower.reserve(s.size());
    for (char32_t c : s) append_lowercase(lower, c);
    s = std::move(lower);
  }
  return s;
}

std::vector<std::pair<size_t, size_t>> pre_tokenize(std::u32string_view text) {
  std::vector<std::pair<size_t, size_t>> words;
  size_t start = 0;
  auto flush = [&](size_t end) {
    if (end > start) words.emplace_back(start, end);
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (is_whitespace(c)) {
      flush(i);
      start = i + 1;
    } else if (is_punctuation(c)) {
      flush(i);
      words.emplace_back(i, i + 1);
      start = i + 1;
    }
  }
  flush(text.size());
  return words;
}

}  // namespace brisk::data::bert
