// Tokenizer throughput: GPT-2's BPE (data::GPT2Tokenizer: encode, pre-tokenisation alone and
// decode) and BERT's WordPiece (data::BertTokenizer: encode per document, with the uncased test
// vocabulary of tests/data/fixtures/wordpiece, or BRISK_BERT_DIR's folder), over a few MB of
// text, in MB/s of text and tokens/s, on one thread. Results: bench/RESULTS.md.
//
// Text: the files of BRISK_BENCH_TEXT (a file or a folder), else Debian's fortunes
// (/usr/share/games/fortunes), repeated to at least 4 MB. Vocabulary: BRISK_BPE_VOCAB and
// BRISK_BPE_MERGES (a vocab.json and merges.txt), else GPT-2's own (tests/data/fixtures/gpt2).
#include <benchmark/benchmark.h>
#include <brisk/data/bert_tokenizer.h>
#include <brisk/data/bpe.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using brisk::data::GPT2Tokenizer;

namespace {

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string& text() {
  static const std::string t = [] {
    const char* env = std::getenv("BRISK_BENCH_TEXT");
    const fs::path src = env ? fs::path(env) : fs::path("/usr/share/games/fortunes");
    std::vector<fs::path> files;
    if (fs::is_directory(src)) {
      for (const auto& e : fs::directory_iterator(src))
        if (e.is_regular_file() && e.path().extension() != ".dat" && e.path().extension() != ".u8")
          files.push_back(e.path());
    } else if (fs::exists(src)) {
      files.push_back(src);
    }
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& f : files) all += read(f);
    if (all.empty()) all = "The quick brown fox doesn't jump over the lazy dog; it's 12 o'clock.\n";
    std::string out;
    while (out.size() < (4u << 20)) out += all;
    return out;
  }();
  return t;
}

const GPT2Tokenizer& tokenizer() {
  static const GPT2Tokenizer tok = [] {
    const char* v = std::getenv("BRISK_BPE_VOCAB");
    const char* m = std::getenv("BRISK_BPE_MERGES");
    if (v && m) return GPT2Tokenizer::from_files(v, m);
    const std::string dir = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/gpt2/";
    return GPT2Tokenizer::from_files(dir + "vocab.json", dir + "merges.txt");
  }();
  return tok;
}

// The fortunes, one string per fortune (each up to and with its "%" line).
std::vector<std::string_view> documents() {
  const std::string& t = text();
  std::vector<std::string_view> docs;
  for (size_t pos = 0; pos < t.size();) {
    size_t end = t.find("\n%\n", pos);
    end = end == std::string::npos ? t.size() : end + 3;
    docs.push_back(std::string_view(t).substr(pos, end - pos));
    pos = end;
  }
  return docs;
}

void BM_Encode(benchmark::State& state) {
  const GPT2Tokenizer& tok = tokenizer();
  const std::string& t = text();
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok.encode(t);
    tokens += ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["MB"] = static_cast<double>(t.size()) / 1e6;
  state.SetLabel(tok.name());
}

// One encode call per fortune (a few hundred bytes each): the per-call cache helps less.
void BM_EncodePerDocument(benchmark::State& state) {
  const GPT2Tokenizer& tok = tokenizer();
  const std::string& t = text();
  const std::vector<std::string_view> docs = documents();
  size_t tokens = 0;
  for (auto _ : state) {
    for (std::string_view d : docs) {
      std::vector<int32_t> ids = tok.encode(d);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["docs"] = static_cast<double>(docs.size());
}

// BERT: one encode_plus ([CLS] ... [SEP]) per fortune, as a classifier's data set would call it.
void BM_BertEncodePerDocument(benchmark::State& state) {
  const char* dir = std::getenv("BRISK_BERT_DIR");
  static const brisk::data::BertTokenizer tok = brisk::data::BertTokenizer::from_pretrained(
      dir ? std::string(dir) : std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/wordpiece/uncased");
  const std::vector<std::string_view> docs = documents();
  size_t tokens = 0;
  for (auto _ : state) {
    for (std::string_view d : docs) {
      brisk::data::Encoding e = tok.encode_plus(d);
      tokens += e.size();
      benchmark::DoNotOptimize(e.input_ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["docs"] = static_cast<double>(docs.size());
  state.counters["tokens"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
  state.SetLabel(tok.name());
}

void BM_Pretokenize(benchmark::State& state) {
  const std::string& t = text();
  for (auto _ : state) {
    std::vector<std::string_view> p = GPT2Tokenizer::pretokenize(t);
    benchmark::DoNotOptimize(p.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.size()));
}

void BM_Decode(benchmark::State& state) {
  const GPT2Tokenizer& tok = tokenizer();
  const std::vector<int32_t> ids = tok.encode(text());
  for (auto _ : state) {
    std::string s = tok.decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ids.size()), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodePerDocument)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_BertEncodePerDocument)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Pretokenize)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
