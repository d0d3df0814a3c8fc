// Learning a WordPiece vocabulary (wordpiece_vocab.h): count the pre-tokenizer's words, start from
// their characters, then merge the most frequent adjacent pair of pieces, again and again.
#include "wordpiece_vocab.h"

#include <brisk/util/error.h>

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace wordpiece {

using brisk::data::BertTokenizer;

namespace {

const std::vector<std::string> kSpecials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// The UTF-8 characters of a word (a byte that starts no valid sequence is one character).
std::vector<std::string> characters(const std::string& word) {
  std::vector<std::string> out;
  for (size_t i = 0; i < word.size();) {
    const auto c = static_cast<unsigned char>(word[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, word.size() - i);
    out.push_back(word.substr(i, n));
    i += n;
  }
  return out;
}

// The words of the texts and how often each occurs, sorted (so the result does not depend on hashing).
std::vector<std::pair<std::string, int64_t>> count_words(std::span<const std::string> texts) {
  const BertTokenizer pre = BertTokenizer::from_vocab(kSpecials);
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& t : texts)
    for (std::string& w : pre.pre_tokenize(t)) ++counts[std::move(w)];
  std::vector<std::pair<std::string, int64_t>> words(counts.begin(), counts.end());
  std::sort(words.begin(), words.end());
  return words;
}

// Strings ranked by count (most frequent first), ties by the string.
std::vector<std::string> by_frequency(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (auto& [s, n] : v) out.push_back(s);
  return out;
}

// The merge loop's state: every word as a list of piece ids, each adjacent pair's count (weighted by
// the words' counts), the words each pair may occur in, and a heap of pairs by count.
class Merger {
 public:
  Merger(std::vector<std::string>& vocab, int64_t min_frequency) : vocab_(vocab), min_frequency_(min_frequency) {
    for (size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], static_cast<int32_t>(i));
  }

  void add_word(const std::vector<std::string>& pieces, int64_t count) {
    std::vector<int32_t> w;
    for (const std::string& p : pieces) w.push_back(ids_.at(p));
    const auto index = static_cast<int32_t>(words_.size());
    words_.push_back(std::move(w));
    counts_.push_back(count);
    seen_.push_back(-1);
    for_pairs(words_.back(), [&](uint64_t p) {
      pair_count_[p] += count;
      where_[p].push_back(index);
    });
  }

  // Merges until the vocabulary has `size` pieces or no pair is frequent enough.
  void run(size_t size) {
    for (auto& [p, n] : pair_count_) heap_.push({n, p});
    for (int64_t step = 0; vocab_.size() < size; ++step) {
      const std::optional<uint64_t> best = pop_best();
      if (!best) break;
      merge(*best, step);
    }
  }

 private:
  struct Entry {
    int64_t count;
    uint64_t pair;
  };
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }
  static int32_t first(uint64_t p) { return static_cast<int32_t>(p >> 32); }
  static int32_t second(uint64_t p) { return static_cast<int32_t>(p & 0xffffffffu); }
  template <class F>
  static void for_pairs(const std::vector<int32_t>& w, F&& f) {
    for (size_t i = 0; i + 1 < w.size(); ++i) f(key(w[i], w[i + 1]));
  }

  // The most frequent pair whose heap entry is current; ties go to the smaller pair of strings.
  std::optional<uint64_t> pop_best() {
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      auto it = pair_count_.find(e.pair);
      if (it == pair_count_.end() || it->second != e.count) continue;  // stale
      if (e.count < min_frequency_) return std::nullopt;
      return e.pair;
    }
    return std::nullopt;
  }

  void merge(uint64_t pair, int64_t step) {
    const int32_t a = first(pair), b = second(pair);
    const std::string merged =
        vocab_[static_cast<size_t>(a)] + vocab_[static_cast<size_t>(b)].substr(2);  // b is "##..."
    auto [it, fresh] = ids_.emplace(merged, static_cast<int32_t>(vocab_.size()));
    if (fresh) vocab_.push_back(merged);
    const int32_t id = it->second;
    std::unordered_set<uint64_t> changed;
    const std::vector<int32_t> words = std::move(where_[pair]);
    where_.erase(pair);
    for (int32_t w : words) {
      if (seen_[static_cast<size_t>(w)] == step) continue;
      seen_[static_cast<size_t>(w)] = step;
      std::vector<int32_t>& old = words_[static_cast<size_t>(w)];
      std::vector<int32_t> now;
      for (size_t i = 0; i < old.size(); ++i) {
        if (i + 1 < old.size() && old[i] == a && old[i + 1] == b) {
          now.push_back(id);
          ++i;
        } else {
          now.push_back(old[i]);
        }
      }
      if (now.size() == old.size()) continue;
      const int64_t n = counts_[static_cast<size_t>(w)];
      for_pairs(old, [&](uint64_t p) {
        pair_count_[p] -= n;
        changed.insert(p);
      });
      for_pairs(now, [&](uint64_t p) {
        pair_count_[p] += n;
        changed.insert(p);
        if (first(p) == id || second(p) == id) where_[p].push_back(w);
      });
      old = std::move(now);
    }
    for (uint64_t p : changed) {
      const int64_t n = pair_count_[p];
      if (n > 0)
        heap_.push({n, p});
      else
        pair_count_.erase(p);
    }
  }

  struct Lower {
    const std::vector<std::string>* vocab;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const auto& v = *vocab;
      return std::tie(v[static_cast<size_t>(first(x.pair))], v[static_cast<size_t>(second(x.pair))]) >
             std::tie(v[static_cast<size_t>(first(y.pair))], v[static_cast<size_t>(second(y.pair))]);
    }
  };

  std::vector<std::string>& vocab_;
  int64_t min_frequency_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> counts_, seen_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<Entry, std::vector<Entry>, Lower> heap_{Lower{&vocab_}};
};

}  // namespace

std::vector<std::string> learn(std::span<const std::string> texts, const VocabOptions& options) {
  BRISK_CHECK(options.limit_alphabet >= 1 && options.min_frequency >= 1,
              "wordpiece::learn: limit_alphabet and min_frequency must be >= 1, got ", options.limit_alphabet, " and ",
              options.min_frequency);
  const auto words = count_words(texts);
  // The alphabet: the most frequent characters; words using others are left to [UNK].
  std::map<std::string, int64_t> char_counts;
  for (const auto& [w, n] : words)
    for (const std::string& c : characters(w)) char_counts[c] += n;
  std::vector<std::string> alphabet = by_frequency(char_counts);
  if (static_cast<int64_t>(alphabet.size()) > options.limit_alphabet) alphabet.resize(options.limit_alphabet);
  const std::unordered_set<std::string> kept(alphabet.begin(), alphabet.end());
  // Each word as its first character and "##" continuations.
  std::vector<std::pair<std::vector<std::string>, int64_t>> split;
  std::map<std::string, int64_t> piece_counts;
  for (const auto& [w, n] : words) {
    std::vector<std::string> pieces = characters(w);
    if (!std::all_of(pieces.begin(), pieces.end(), [&](const std::string& c) { return kept.count(c) > 0; })) continue;
    for (size_t i = 1; i < pieces.size(); ++i) pieces[i] = "##" + pieces[i];
    for (const std::string& p : pieces) piece_counts[p] += n;
    split.emplace_back(std::move(pieces), n);
  }
  std::vector<std::string> vocab = kSpecials;
  for (std::string& p : by_frequency(piece_counts)) vocab.push_back(std::move(p));
  BRISK_CHECK(static_cast<int64_t>(vocab.size()) <= options.vocab_size, "wordpiece::learn: a vocabulary of ",
              options.vocab_size, " cannot hold the ", kSpecials.size(), " special tokens and the ",
              vocab.size() - kSpecials.size(), " character pieces of the text: use --vocab_size ", vocab.size(),
              " or more (or a smaller --limit_alphabet)");
  Merger merger(vocab, options.min_frequency);
  for (const auto& [pieces, n] : split) merger.add_word(pieces, n);
  merger.run(static_cast<size_t>(options.vocab_size));
  return vocab;
}

BertTokenizer tokenizer_from_texts(std::span<const std::string> texts, const VocabOptions& options) {
  return BertTokenizer::from_vocab(learn(texts, options), {}, "the vocabulary learned from the training text");
}

}  // namespace wordpiece
