// Reading the fortunes task (fortunes.h): quotes, labels, the hash split.
#include "fortunes.h"

#include <brisk/util/error.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fortunes {

namespace fs = std::filesystem;

namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string trimmed(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

// The default folder's error says which package fills it.
std::string missing_hint(const std::string& dir) {
  return dir == "/usr/share/games/fortunes" ? " (apt-get install fortunes, or scripts/setup.sh)" : "";
}

}  // namespace

std::vector<std::string> read_quotes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in, "fortunes: cannot read \"", path, "\"", missing_hint(fs::path(path).parent_path().string()));
  std::vector<std::string> quotes;
  std::string line, current;
  auto flush = [&] {
    std::string q = trimmed(current);
    if (!q.empty()) quotes.push_back(std::move(q));
    current.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "%") {
      flush();
    } else {
      current += line;
      current += '\n';
    }
  }
  flush();
  return quotes;
}

bool in_test_split(std::string_view text) {
  return fnv1a(text) % 5 == 0;
}

bool in_pretraining_validation(std::string_view text) {
  return (fnv1a(text) / 5) % 20 == 0;
}

Task load_task(const std::string& dir, const std::vector<std::string>& files) {
  BRISK_CHECK(files.size() >= 2, "--files needs at least two fortune files, got ", files.size());
  Task task;
  task.labels = files;
  // Each distinct quote and the files it appears in (a quote repeated in one file counts once).
  std::map<std::string, std::vector<int64_t>> where;
  std::vector<std::string> order;  // first appearance, so the data keeps the files' order
  for (size_t f = 0; f < files.size(); ++f) {
    BRISK_CHECK(std::count(files.begin(), files.end(), files[f]) == 1, "--files names \"", files[f], "\" twice");
    std::error_code ec;
    BRISK_CHECK(fs::is_regular_file(fs::path(dir) / files[f], ec), "--files: \"", files[f],
                "\" is not a fortune file in the --data folder \"", dir, "\"", missing_hint(dir));
    const std::vector<std::string> quotes = read_quotes((fs::path(dir) / files[f]).string());
    BRISK_CHECK(!quotes.empty(), "--files: \"", (fs::path(dir) / files[f]).string(),
                "\" holds no quotes (fortune files separate them with lines holding only %)");
    for (const std::string& q : quotes) {
      auto [it, fresh] = where.try_emplace(q);
      if (fresh) order.push_back(q);
      if (it->second.empty() || it->second.back() != static_cast<int64_t>(f))
        it->second.push_back(static_cast<int64_t>(f));
    }
  }
  std::vector<int64_t> train_counts(files.size(), 0);
  for (const std::string& q : order) {
    const std::vector<int64_t>& labels = where.at(q);
    if (labels.size() > 1) {
      ++task.ambiguous;
      continue;
    }
    (in_test_split(q) ? task.test : task.train).push_back({q, labels[0]});
    if (!in_test_split(q)) ++train_counts[static_cast<size_t>(labels[0])];
  }
  task.majority_label = std::max_element(train_counts.begin(), train_counts.end()) - train_counts.begin();
  const auto hits = std::count_if(task.test.begin(), task.test.end(),
                                  [&](const LabelledText& t) { return t.label == task.majority_label; });
  task.majority_baseline = task.test.empty() ? 0.0 : static_cast<double>(hits) / static_cast<double>(task.test.size());
  return task;
}

Corpus load_pretraining_corpus(const std::string& dir) {
  std::error_code ec;
  BRISK_CHECK(fs::is_directory(dir, ec), "--data: \"", dir, "\" is not a folder", missing_hint(dir));
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink() && !e.path().has_extension()) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  Corpus corpus;
  for (const fs::path& p : paths) {
    ++corpus.files;
    for (std::string& q : read_quotes(p.string())) {
      if (in_test_split(q)) continue;
      (in_pretraining_validation(q) ? corpus.validation : corpus.train).push_back(std::move(q));
    }
  }
  BRISK_CHECK(!corpus.train.empty() && !corpus.validation.empty(), "--data: \"", dir,
              "\" holds no fortune files with quotes", missing_hint(dir));
  return corpus;
}

}  // namespace fortunes
