// A WordPiece vocabulary learned from text, for a BERT trained from scratch when no tokenizer folder
// is given: the merges of Hugging Face tokenizers' WordPieceTrainer (byte-pair merges over words,
// continuation pieces spelled "##..."), on the words data::BertTokenizer's pre-tokenizer makes.
#pragma once
#include <brisk/data/bert_tokenizer.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace wordpiece {

struct VocabOptions {
  int64_t vocab_size = 4096;  // special tokens and characters included
  // Characters kept (the most frequent); words with any other character become [UNK].
  int64_t limit_alphabet = 200;
  int64_t min_frequency = 2;  // merges of pairs seen fewer times than this are not made
};

// The vocabulary, in id order: [PAD] [UNK] [CLS] [SEP] [MASK] (so [PAD] is 0, BERT's pad_token_id),
// the characters as word starts and as "##" continuations (most frequent first), then the merged
// pieces in the order they were made, until vocab_size tokens or no pair occurs min_frequency
// times. The same texts give the same vocabulary on every machine (ties go to the smaller pair).
// Throws when vocab_size cannot hold the special tokens and the alphabet, saying how large it must be.
std::vector<std::string> learn(std::span<const std::string> texts, const VocabOptions& options = {});

// An uncased BERT tokenizer over learn(texts, options).
brisk::data::BertTokenizer tokenizer_from_texts(std::span<const std::string> texts, const VocabOptions& options = {});

}  // namespace wordpiece
