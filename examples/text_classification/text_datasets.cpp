// The datasets of text_datasets.h: encoding, padding to the batch's longest, BERT's masking.
#include "text_datasets.h"

#include <algorithm>

namespace text_data {

using namespace brisk;

std::vector<data::Encoding> encode(const data::BertTokenizer& tokenizer, std::span<const std::string> texts,
                                   int64_t max_length) {
  return tokenizer.encode_batch(texts, {.truncation = data::Truncation::LongestFirst, .max_length = max_length});
}

Tensor pad_rows(std::span<const data::Encoding* const> encodings, int32_t pad_id) {
  size_t longest = 0;
  for (const data::Encoding* e : encodings) longest = std::max(longest, e->size());
  const auto b = static_cast<int64_t>(encodings.size()), t = static_cast<int64_t>(longest);
  std::vector<int64_t> rows(static_cast<size_t>(b * 3 * t), 0);
  for (size_t i = 0; i < encodings.size(); ++i) {
    const data::Encoding& e = *encodings[i];
    int64_t* ids = rows.data() + i * 3 * longest;
    int64_t* types = ids + longest;
    int64_t* mask = types + longest;
    for (size_t j = 0; j < longest; ++j) {
      const bool token = j < e.size();
      ids[j] = token ? e.input_ids[j] : pad_id;
      types[j] = token ? e.token_type_ids[j] : 0;
      mask[j] = token ? e.attention_mask[j] : 0;
    }
  }
  return from_vector<int64_t>(rows, {b, 3, t});
}

BertInputs unpack_rows(const Tensor& rows) {
  return {contiguous(rows.select(1, 0)), contiguous(rows.select(1, 1)), contiguous(rows.select(1, 2))};
}

namespace {

std::vector<const data::Encoding*> pick(const std::vector<data::Encoding>& all, const std::vector<int64_t>& indices,
                                        const char* who) {
  BRISK_CHECK(!indices.empty(), who, "::get_batch: no indices");
  std::vector<const data::Encoding*> out;
  for (int64_t i : indices) {
    BRISK_CHECK(i >= 0 && i < static_cast<int64_t>(all.size()), who, "::get_batch: index ", i, " out of range for ",
                all.size(), " texts");
    out.push_back(&all[static_cast<size_t>(i)]);
  }
  return out;
}

data::Example first(const data::Batch& b) {
  return {b.data.select(0, 0), b.target.select(0, 0)};
}

// splitmix64: a small generator whose stream depends only on its seed.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }
};

}  // namespace

LabelledTexts::LabelledTexts(std::vector<data::Encoding> encodings, std::vector<int64_t> labels, int32_t pad_id)
    : encodings_(std::move(encodings)), labels_(std::move(labels)), pad_id_(pad_id) {
  BRISK_CHECK(encodings_.size() == labels_.size(), "LabelledTexts: ", encodings_.size(), " texts but ", labels_.size(),
              " labels");
}

data::Example LabelledTexts::get(int64_t index) const {
  return first(get_batch({index}));
}

data::Batch LabelledTexts::get_batch(const std::vector<int64_t>& indices) const {
  const auto rows = pick(encodings_, indices, "LabelledTexts");
  std::vector<int64_t> labels;
  for (int64_t i : indices) labels.push_back(labels_[static_cast<size_t>(i)]);
  return {pad_rows(rows, pad_id_), from_vector<int64_t>(labels, {static_cast<int64_t>(labels.size())})};
}

MaskedTexts::MaskedTexts(std::vector<data::Encoding> encodings, MaskingOptions options)
    : encodings_(std::move(encodings)), options_(options) {
  BRISK_CHECK(options_.probability > 0 && options_.probability <= 1,
              "MaskedTexts: the masking probability must be in (0, 1], got ", options_.probability);
  BRISK_CHECK(options_.vocab_size > 0 && options_.mask_id >= 0 && options_.mask_id < options_.vocab_size,
              "MaskedTexts: [MASK] id ", options_.mask_id, " outside the vocabulary of ", options_.vocab_size);
}

data::Example MaskedTexts::get(int64_t index) const {
  return first(get_batch({index}));
}

data::Batch MaskedTexts::get_batch(const std::vector<int64_t>& indices) const {
  const auto chosen = pick(encodings_, indices, "MaskedTexts");
  const uint64_t epoch = options_.fixed ? 0 : epoch_.load();
  std::vector<data::Encoding> masked;
  std::vector<std::vector<int64_t>> positions, labels;
  for (size_t k = 0; k < chosen.size(); ++k) {
    data::Encoding e = *chosen[k];
    SplitMix rng{options_.seed * 0x100000001b3ull ^ (epoch << 40) ^ static_cast<uint64_t>(indices[k])};
    rng.next();
    std::vector<size_t> candidates, picked;
    for (size_t j = 0; j < e.size(); ++j)
      if (!e.special_tokens_mask[j]) candidates.push_back(j);
    for (size_t j : candidates)
      if (rng.uniform() < options_.probability) picked.push_back(j);
    if (picked.empty() && !candidates.empty())
      picked.push_back(candidates[static_cast<size_t>(rng.below(static_cast<int64_t>(candidates.size())))]);
    positions.emplace_back();
    labels.emplace_back();
    for (size_t j : picked) {
      positions.back().push_back(static_cast<int64_t>(j));
      labels.back().push_back(e.input_ids[j]);
      const double r = rng.uniform();
      if (r < 0.8)
        e.input_ids[j] = options_.mask_id;
      else if (r < 0.9)
        e.input_ids[j] = static_cast<int32_t>(rng.below(options_.vocab_size));
    }
    masked.push_back(std::move(e));
  }
  std::vector<const data::Encoding*> rows;
  for (const data::Encoding& e : masked) rows.push_back(&e);
  const Tensor inputs = pad_rows(rows, options_.pad_id);  // (B, 3, T)
  const int64_t B = inputs.size(0), T = inputs.size(2);
  int64_t K = 1;
  for (const auto& p : positions) K = std::max(K, static_cast<int64_t>(p.size()));
  std::vector<int64_t> where(static_cast<size_t>(B * T), -1), target(static_cast<size_t>(B * K), -100);
  for (size_t b = 0; b < positions.size(); ++b)
    for (size_t i = 0; i < positions[b].size(); ++i) {
      where[b * static_cast<size_t>(T) + i] = positions[b][i];
      target[b * static_cast<size_t>(K) + i] = labels[b][i];
    }
  return {cat({inputs, from_vector<int64_t>(where, {B, 1, T})}, 1), from_vector<int64_t>(target, {B, K})};
}

std::pair<Tensor, int64_t> chosen_rows(const Tensor& rows, Device device) {
  BRISK_CHECK(rows.dim() == 3 && rows.size(1) == 4, "chosen_rows: expected MaskedTexts' rows (B, 4, T), got ",
              rows.sizes());
  const int64_t B = rows.size(0), T = rows.size(2);
  const std::vector<int64_t> where = contiguous(rows.select(1, 3)).to_vector<int64_t>();
  int64_t K = 1;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    while (n < T && where[static_cast<size_t>(b * T + n)] >= 0) ++n;
    K = std::max(K, n);
  }
  std::vector<int64_t> index(static_cast<size_t>(B * K));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < K; ++i) {
      const int64_t p = where[static_cast<size_t>(b * T + i)];
      index[static_cast<size_t>(b * K + i)] = b * T + (p >= 0 ? p : 0);
    }
  return {from_vector<int64_t>(index, {B * K}, device), K};
}

}  // namespace text_data
