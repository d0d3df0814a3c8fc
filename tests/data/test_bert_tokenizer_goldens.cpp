// BertTokenizer against Hugging Face tokenizers (the Rust core transformers' BertTokenizerFast
// runs) and transformers.js: the golden encodings of scripts/wordpiece_fixtures.cjs, on its two
// vocabularies (uncased and cased) loaded from tokenizer.json, from vocab.txt + tokenizer_config.json
// and from the folder, for the hard strings (goldens.json) and every fortune of Debian's
// `fortunes` package (fortunes.txt.gz; the text is read from the installed package).
#include <gtest/gtest.h>
#include <zlib.h>

#include <brisk/data/bert_tokenizer.h>
#include <brisk/util/json.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "data/temp_dir.h"

using namespace brisk;
using data::BertTokenizer;

namespace {

const std::string kDir = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/wordpiece/";
const char* kFortunes = "/usr/share/games/fortunes";

std::vector<int32_t> ints(const json::Value& v) {
  std::vector<int32_t> out;
  for (const json::Value& x : v.as_array()) out.push_back(static_cast<int32_t>(x.as_int()));
  return out;
}

std::vector<std::string> strings(const json::Value& v) {
  std::vector<std::string> out;
  for (const json::Value& x : v.as_array()) out.push_back(x.as_string());
  return out;
}

data::EncodeOptions options_of(const json::Value& o) {
  data::EncodeOptions opt;
  if (const json::Value* t = o.find("truncation")) opt.truncation = data::parse_truncation(t->as_string());
  if (const json::Value* p = o.find("padding")) opt.padding = data::parse_padding(p->as_string());
  if (const json::Value* m = o.find("max_length")) opt.max_length = m->as_int();
  if (const json::Value* m = o.find("pad_to_multiple_of")) opt.pad_to_multiple_of = m->as_int();
  return opt;
}

// Every case of goldens.json for one vocabulary: ids, type ids, attention and special-token
// masks, tokens and both decodings, or the error the reference raised. Returns the cases checked.
size_t check_cases(const BertTokenizer& tok, const std::string& variant, const std::string& how) {
  json::Value goldens = json::parse(brisk::testing::read_file(kDir + "goldens.json"));
  size_t checked = 0;
  for (const json::Value& c : goldens.at("cases").as_array()) {
    if (c.at("variant").as_string() != variant) continue;
    std::string name = variant;
    name.append("/").append(c.at("name").as_string()).append(" (").append(how).append(")");
    const std::vector<std::string> texts = strings(c.at("texts"));
    const data::EncodeOptions opt = options_of(c.at("options"));
    std::vector<data::Encoding> got;
    try {
      if (const json::Value* pairs = c.find("pairs")) {
        const std::vector<std::string> b = strings(*pairs);
        got = texts.size() == 1 ? std::vector<data::Encoding>{tok.encode_pair(texts[0], b[0], opt)}
                                : tok.encode_batch(texts, b, opt);
      } else {
        got = texts.size() == 1 ? std::vector<data::Encoding>{tok.encode_plus(texts[0], opt)}
                                : tok.encode_batch(texts, opt);
      }
    } catch (const Error& e) {
      EXPECT_TRUE(c.contains("error")) << name << ": unexpected error " << e.what();
      ++checked;
      continue;
    }
    ++checked;
    if (c.contains("error")) {
      ADD_FAILURE() << name << ": the reference raised '" << c.at("error").as_string() << "', brisk did not";
      continue;
    }
    const auto& want = c.at("encodings").as_array();
    EXPECT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      EXPECT_EQ(got[i].input_ids, ints(want[i].at("ids"))) << name << " [" << i << "]";
      EXPECT_EQ(got[i].token_type_ids, ints(want[i].at("type_ids"))) << name << " [" << i << "]";
      EXPECT_EQ(got[i].attention_mask, ints(want[i].at("mask"))) << name << " [" << i << "]";
      EXPECT_EQ(got[i].special_tokens_mask, ints(want[i].at("special"))) << name << " [" << i << "]";
      EXPECT_EQ(tok.convert_ids_to_tokens(got[i].input_ids), strings(want[i].at("tokens"))) << name << " [" << i << "]";
      EXPECT_EQ(tok.decode(got[i].input_ids), c.at("decoded")[i].as_string()) << name << " [" << i << "]";
      EXPECT_EQ(tok.decode(got[i].input_ids, {.skip_special_tokens = true}),
                c.at("decoded_skip_special")[i].as_string())
          << name << " [" << i << "]";
    }
  }
  return checked;
}

// The tokenizer of one vocabulary read from vocab.txt with its tokenizer_config.json alone.
BertTokenizer from_vocab_txt_folder(const std::string& variant, const brisk::testing::TempDir& tmp) {
  const std::string dir = tmp.file(variant);
  std::filesystem::create_directories(dir);
  for (const char* f : {"vocab.txt", "tokenizer_config.json"})
    std::filesystem::copy_file(kDir + variant + "/" + f, dir + "/" + f);
  return BertTokenizer::from_pretrained(dir);
}

}  // namespace

TEST(BertTokenizerGoldens, HardStringsMatchHuggingFaceTokenizersFromEveryFileForm) {
  brisk::testing::TempDir tmp;
  for (const std::string variant : {"uncased", "cased"}) {
    const std::string dir = kDir + variant;
    ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json"))
        << dir << ": the fixtures are missing; run scripts/wordpiece_fixtures.cjs (see its header)";
    BertTokenizer folder = BertTokenizer::from_pretrained(dir);  // tokenizer.json + tokenizer_config.json
    EXPECT_EQ(folder.model_max_length(), 512);
    EXPECT_EQ(folder.normalization().lowercase, variant == "uncased");
    EXPECT_EQ(folder.unk_token_id(), 100);
    EXPECT_EQ(folder.cls_token_id(), 101);
    EXPECT_EQ(folder.sep_token_id(), 102);
    EXPECT_EQ(folder.mask_token_id(), 103);
    EXPECT_EQ(folder.pad_token_id(), 0);
    EXPECT_GE(check_cases(folder, variant, "folder"), 60u);
    EXPECT_GE(check_cases(BertTokenizer::from_tokenizer_json(dir + "/tokenizer.json"), variant, "tokenizer.json"), 60u);
    BertTokenizer vocab = from_vocab_txt_folder(variant, tmp);
    EXPECT_EQ(vocab.vocab_size(), folder.vocab_size());
    EXPECT_GE(check_cases(vocab, variant, "vocab.txt"), 60u);
  }
}

TEST(BertTokenizerGoldens, SavePretrainedWritesTheTokenizerJsonHuggingFaceWrites) {
  // The uncased folder's tokenizer.json was saved by Hugging Face tokenizers; brisk, reading the
  // same vocabulary from vocab.txt, writes the same JSON (so transformers and tokenizers read it).
  brisk::testing::TempDir tmp;
  from_vocab_txt_folder("uncased", tmp).save_pretrained(tmp.file("saved"));
  json::Value theirs = json::parse(brisk::testing::read_file(kDir + "uncased/tokenizer.json"));
  json::Value ours = json::parse(brisk::testing::read_file(tmp.file("saved") + "/tokenizer.json"));
  // The vocabulary is an object whose key order means nothing (tokenizers 0.23 writes its own).
  auto sorted_vocab = [](json::Value& j) {
    json::Value::Object v = j["model"]["vocab"].items();
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    j["model"].set("vocab", json::Value::object(std::move(v)));
  };
  sorted_vocab(theirs);
  sorted_vocab(ours);
  EXPECT_EQ(ours.at("model").at("vocab").size(), 5462u);
  for (const auto& [key, value] : theirs.items()) {
    ASSERT_TRUE(ours.contains(key)) << key;
    EXPECT_TRUE(ours.at(key) == value) << key << ":\n  brisk: " << ours.at(key).dump().substr(0, 600)
                                       << "\n  tokenizers: " << value.dump().substr(0, 600);
  }
  EXPECT_EQ(ours.size(), theirs.size());
}

namespace {

uint64_t fnv64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint32_t fnv32(const std::vector<int32_t>& ids) {
  uint32_t h = 0x811c9dc5u;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x01000193u;
    }
  return h;
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string out;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

// A fortune file split as scripts/wordpiece_fixtures.cjs splits it: the lines before each "%".
std::vector<std::string> split_fortunes(const std::string& text) {
  std::vector<std::string> lines, out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  std::string cur;
  bool any = false;
  for (const std::string& line : lines) {
    if (line == "%") {
      out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += (any ? "\n" : "") + line;
      any = true;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

struct Fortune {
  std::string text;
  bool available = false;
  size_t want_uncased = 0, want_cased = 0;
  uint32_t hash_uncased = 0, hash_cased = 0;
};

}  // namespace

TEST(BertTokenizerGoldens, EveryFortuneMatchesHuggingFaceTokenizers) {
  const std::string fixture = gunzip(kDir + "fortunes.txt.gz");
  ASSERT_FALSE(fixture.empty()) << kDir << "fortunes.txt.gz is missing: run scripts/wordpiece_fixtures.cjs";
  if (!std::filesystem::is_directory(kFortunes))
    GTEST_SKIP() << kFortunes << " is missing: install Debian's fortunes package (apt-get install fortunes) to "
                 << "compare every fortune";
  const BertTokenizer uncased = BertTokenizer::from_pretrained(kDir + "uncased");
  const BertTokenizer cased = BertTokenizer::from_pretrained(kDir + "cased");
  std::vector<Fortune> fortunes;
  std::vector<std::string> other_lines;
  size_t files = 0, same_files = 0;
  std::vector<std::string> file_fortunes;
  size_t next_in_file = 0;
  std::stringstream in(fixture);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == 'I' || line[0] == 'P') {
      other_lines.push_back(line);
      continue;
    }
    std::istringstream ls(line);
    if (line[0] == 'F') {
      std::string tag, name, hash;
      size_t count = 0;
      ls >> tag >> name >> hash >> count;
      ++files;
      const std::string text = brisk::testing::read_file(std::string(kFortunes) + "/" + name);
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv64(text)));
      file_fortunes = hex == hash ? split_fortunes(text) : std::vector<std::string>{};
      if (!file_fortunes.empty()) {
        EXPECT_EQ(file_fortunes.size(), count) << name;
        ++same_files;
      }
      next_in_file = 0;
      continue;
    }
    Fortune f;
    std::string hu, hc;
    ls >> f.want_uncased >> hu >> f.want_cased >> hc;
    f.hash_uncased = static_cast<uint32_t>(std::stoul(hu, nullptr, 16));
    f.hash_cased = static_cast<uint32_t>(std::stoul(hc, nullptr, 16));
    if (next_in_file < file_fortunes.size()) {
      f.text = file_fortunes[next_in_file];
      f.available = true;
    }
    ++next_in_file;
    fortunes.push_back(std::move(f));
  }
  ASSERT_GT(files, 40u);
  ASSERT_GT(fortunes.size(), 15000u);
  if (same_files == 0)
    GTEST_SKIP() << "no fortune file is the one the fixture was made from (a different package version)";
  EXPECT_EQ(same_files, files) << "some fortune files differ from the fixture's: only the same ones are compared";
  size_t compared = 0, tokens = 0, bad = 0;
  for (size_t i = 0; i < fortunes.size(); ++i) {
    const Fortune& f = fortunes[i];
    if (!f.available) continue;
    const data::Encoding u = uncased.encode_plus(f.text), c = cased.encode_plus(f.text);
    const bool ok = u.size() == f.want_uncased && fnv32(u.input_ids) == f.hash_uncased && c.size() == f.want_cased &&
                    fnv32(c.input_ids) == f.hash_cased;
    EXPECT_EQ(u.token_type_ids, std::vector<int32_t>(u.size(), 0));
    EXPECT_EQ(u.attention_mask, std::vector<int32_t>(u.size(), 1));
    if (!ok && ++bad <= 5) {
      std::string toks;
      for (const std::string& t : uncased.convert_ids_to_tokens(u.input_ids)) toks += t + " ";
      ADD_FAILURE() << "fortune " << i << " differs (uncased " << u.size() << " tokens, want " << f.want_uncased
                    << "; cased " << c.size() << ", want " << f.want_cased << "): " << f.text
                    << "\nbrisk's uncased: " << toks;
    }
    ++compared;
    tokens += u.size() + c.size();
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(tokens, 1000000u);
  // Every 64th fortune with its ids, and every 32nd paired with the next (longest_first, 48, padded).
  size_t full = 0, pairs = 0;
  for (const std::string& line : other_lines) {
    std::istringstream ls(line);
    std::string tag;
    size_t index = 0;
    ls >> tag >> index;
    ASSERT_LT(index + 1, fortunes.size()) << line;
    if (!fortunes[index].available || (tag == "P" && !fortunes[index + 1].available)) continue;
    if (tag == "I") {
      std::vector<int32_t> want;
      for (int32_t id; ls >> id;) want.push_back(id);
      EXPECT_EQ(uncased.encode_plus(fortunes[index].text).input_ids, want) << "fortune " << index;
      ++full;
      continue;
    }
    std::string ids, types, mask;
    ls >> ids >> types >> mask;
    const data::Encoding e = uncased.encode_pair(
        fortunes[index].text, fortunes[index + 1].text,
        {.truncation = data::Truncation::LongestFirst, .padding = data::Padding::MaxLength, .max_length = 48});
    std::string got_ids, got_types, got_mask;
    for (size_t k = 0; k < e.size(); ++k) {
      if (k > 0) got_ids += ',';
      got_ids += std::to_string(e.input_ids[k]);
      got_types += std::to_string(e.token_type_ids[k]);
      got_mask += std::to_string(e.attention_mask[k]);
    }
    EXPECT_EQ(got_ids, ids) << "pair " << index;
    EXPECT_EQ(got_types, types) << "pair " << index;
    EXPECT_EQ(got_mask, mask) << "pair " << index;
    ++pairs;
  }
  EXPECT_GT(compared, 15000u);
  EXPECT_GT(full, 200u);
  EXPECT_GT(pairs, 400u);
}
