// The fortunes task (docs/pretrained.md): the quotes of Debian's `fortunes` files, each labelled with
// the file it comes from, split into train and test by a hash of the text (the same on every machine).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fortunes {

// The four files the task classifies by default: comparable sizes (1,050 to 1,250 quotes each) and
// distinct styles (computing jokes, literary quotations, dictionary-style definitions and laws,
// sayings about people).
inline constexpr const char* kDefaultFiles = "computers,cookie,definitions,people";

// The quotes of one fortune file: the text between lines holding only "%", without the white space
// at either end; empty quotes are skipped. A missing or unreadable file throws naming it.
std::vector<std::string> read_quotes(const std::string& path);

// The deterministic split: a text is in the test set when the FNV-1a hash of its bytes is 0 mod 5
// (about 20%); every program on every machine puts a text in the same set.
bool in_test_split(std::string_view text);
// Among the training texts, the 5% the masked-language-model pretraining validates on.
bool in_pretraining_validation(std::string_view text);

struct LabelledText {
  std::string text;
  int64_t label = 0;
};

struct Task {
  std::vector<std::string> labels;  // the file names, id order
  std::vector<LabelledText> train, test;
  int64_t ambiguous = 0;  // quotes found in two or more of the files: left out
  // The label most frequent in the training set, and the test accuracy of always answering it.
  int64_t majority_label = 0;
  double majority_baseline = 0;
};

// The labelled quotes of `files` (names in `dir`), each quote once; a quote in several of the files
// is left out (its label would be ambiguous). Fewer than two files, a missing file, or a file
// without quotes throws naming it (and the package to install for the default folder).
Task load_task(const std::string& dir, const std::vector<std::string>& files);

// Every quote of every fortune file in `dir` (the plain files: no .dat index, no .u8 link) that is
// not in the test split, for pretraining: the classifier's test quotes are never seen.
struct Corpus {
  std::vector<std::string> train, validation;
  int64_t files = 0;
};
Corpus load_pretraining_corpus(const std::string& dir);

}  // namespace fortunes
