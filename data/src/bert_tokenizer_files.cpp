// BertTokenizer's files: vocab.txt, Hugging Face tokenizers' tokenizer.json, transformers'
// tokenizer_config.json, a folder of them (from_pretrained), and writing them (save_pretrained).
#include <filesystem>
#include <tuple>

#include "bert_tokenizer_impl.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "brisk/util/json.h"
#include "read_file.h"

namespace brisk::data {

namespace {

namespace fs = std::filesystem;

// The lines of vocab.txt as transformers' load_vocab reads them: one token per line, the line
// end ("\n" or "\r\n") removed, nothing else; a last line without a line end counts.
std::vector<std::string> vocab_lines(std::string_view text) {
  std::vector<std::string> tokens;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (line.ends_with('\r')) line.remove_suffix(1);
    tokens.emplace_back(line);
    pos = nl + 1;
  }
  return tokens;
}

// What tokenizer_config.json says about the normalizer; only the keys it has.
struct ConfigNormalization {
  std::optional<bool> lowercase, handle_chinese_chars;
  bool has_strip_accents = false;
  std::optional<bool> strip_accents;  // with has_strip_accents: null means "as lowercase"
};

const json::Value* field(const json::Value& obj, std::string_view key) {
  const json::Value* v = obj.find(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

bool get_bool(const json::Value& v, const std::string& source, std::string_view key) {
  BRISK_CHECK(v.is_bool(), "BertTokenizer: '", source, "': \"", key, "\" must be true or false, not ", v.dump());
  return v.as_bool();
}

std::string get_string(const json::Value& v, const std::string& source, std::string_view key) {
  BRISK_CHECK(v.is_string(), "BertTokenizer: '", source, "': \"", key, "\" must be a string, not ", v.dump());
  return v.as_string();
}

// A special token in tokenizer_config.json: a string, or an AddedToken object with "content".
std::string token_name(const json::Value& v, const std::string& source, std::string_view key) {
  if (v.is_object() && v.contains("content")) return get_string(v.at("content"), source, key);
  return get_string(v, source, key);
}

BertTokenizerOptions read_tokenizer_config(const std::string& path, BertTokenizerOptions options,
                                           ConfigNormalization& norm) {
  const std::string text = read_whole_file(path, "BertTokenizer::from_pretrained");
  json::Value cfg;
  try {
    cfg = json::parse(text);
  } catch (const Error& e) {
    BRISK_THROW("BertTokenizer: '", path, "' is not valid JSON: ", e.message());
  }
  BRISK_CHECK(cfg.is_object(), "BertTokenizer: '", path, "' must hold a JSON object, not ",
              json::type_name(cfg.type()));
  if (const json::Value* v = field(cfg, "do_lower_case")) norm.lowercase = get_bool(*v, path, "do_lower_case");
  if (const json::Value* v = field(cfg, "tokenize_chinese_chars"))
    norm.handle_chinese_chars = get_bool(*v, path, "tokenize_chinese_chars");
  if (const json::Value* v = cfg.find("strip_accents")) {
    norm.has_strip_accents = true;
    if (!v->is_null()) norm.strip_accents = get_bool(*v, path, "strip_accents");
  }
  if (const json::Value* v = field(cfg, "model_max_length")) {
    BRISK_CHECK(v->is_number() && v->as_double() >= 1, "BertTokenizer: '", path,
                "': \"model_max_length\" must be a positive number, not ", v->dump());
    // transformers writes 1e30 ("no limit") for models without one.
    options.model_max_length = v->as_double() > 1e15 ? 0 : static_cast<int64_t>(v->as_double());
  }
  if (const json::Value* v = field(cfg, "clean_up_tokenization_spaces"))
    options.clean_up_tokenization_spaces = get_bool(*v, path, "clean_up_tokenization_spaces");
  const std::pair<const char*, std::string*> names[] = {{"unk_token", &options.unk_token},
                                                        {"cls_token", &options.cls_token},
                                                        {"sep_token", &options.sep_token},
                                                        {"pad_token", &options.pad_token},
                                                        {"mask_token", &options.mask_token}};
  for (auto [key, out] : names)
    if (const json::Value* v = field(cfg, key)) *out = token_name(*v, path, key);
  return options;
}

}  // namespace

void BertTokenizer::Impl::finish() {
  const std::string who = "BertTokenizer: '" + source + "'";
  BRISK_CHECK(!tokens.empty(), who, " has no tokens");
  BRISK_CHECK(options.max_input_chars_per_word >= 1, who, ": max_input_chars_per_word ",
              options.max_input_chars_per_word, " must be at least 1");
  special.assign(tokens.size(), 0);
  raw_added.clear();
  raw_added_ids.clear();
  normalized_added.clear();
  normalized_added_ids.clear();
  std::vector<const AddedToken*> order;
  for (const AddedToken& t : added) {
    BRISK_CHECK(!t.content.empty(), who, ": added token ", t.id, " is empty");
    if (t.special) special[static_cast<size_t>(t.id)] = 1;
    order.push_back(&t);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
  for (const AddedToken* t : order) {
    if (t->normalized) {
      std::u32string c = bert::decode_utf8(t->content);
      normalized_added.push_back(has_normalizer ? bert::normalize(c, flags) : c);
      normalized_added_ids.push_back(t->id);
    } else {
      raw_added.push_back(t->content);
      raw_added_ids.push_back(t->id);
    }
  }
  auto id_of = [&](const std::string& name) {
    auto it = vocab.find(name);
    if (it != vocab.end()) return it->second;
    for (const AddedToken& t : added)
      if (t.content == name) return t.id;
    return -1;
  };
  unk_id = vocab.contains(options.unk_token) ? vocab.find(options.unk_token)->second : -1;
  BRISK_CHECK(unk_id >= 0, who, " has no unknown token ", json::quote(options.unk_token),
              " in its vocabulary: WordPiece needs one for words it cannot split");
  cls_id = id_of(options.cls_token);
  sep_id = id_of(options.sep_token);
  pad_id = id_of(options.pad_token);
  mask_id = id_of(options.mask_token);
  max_piece_chars = 0;
  const std::string& prefix = options.continuing_subword_prefix;
  for (const auto& [token, id] : vocab) {
    std::string_view t = token;
    if (!prefix.empty() && t.starts_with(prefix)) t.remove_prefix(prefix.size());
    max_piece_chars = std::max(max_piece_chars, bert::decode_utf8(t).size());
    max_piece_chars = std::max(max_piece_chars, bert::decode_utf8(token).size());
  }
}

BertTokenizer BertTokenizer::from_vocab(std::vector<std::string> tokens, const BertTokenizerOptions& options,
                                        const std::string& source) {
  auto m = std::make_shared<Impl>();
  m->source = source;
  m->options = options;
  m->flags = resolve_normalization(options.normalization);
  BRISK_CHECK(tokens.size() < static_cast<size_t>(INT32_MAX), "BertTokenizer: '", source, "' has too many tokens (",
              tokens.size(), ")");
  m->vocab.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto [it, inserted] = m->vocab.emplace(tokens[i], static_cast<int32_t>(i));
    BRISK_CHECK(inserted, "BertTokenizer: '", source, "': token ", json::quote(tokens[i]), " appears twice, as id ",
                it->second, " (line ", it->second + 1, ") and id ", i, " (line ", i + 1,
                "): each token must appear once");
  }
  m->tokens = std::move(tokens);
  // The special tokens the vocabulary has are split out of the text as themselves, as
  // transformers' BertTokenizer does with its special tokens.
  for (const std::string* name :
       {&options.unk_token, &options.sep_token, &options.pad_token, &options.cls_token, &options.mask_token}) {
    auto it = m->vocab.find(*name);
    if (it == m->vocab.end()) continue;
    bool seen = false;
    for (const AddedToken& t : m->added) seen = seen || t.id == it->second;
    if (!seen) m->added.push_back({.content = *name, .id = it->second, .special = true, .normalized = false});
  }
  m->finish();
  for (auto [name, what] : {std::pair{&options.cls_token, "cls_token"}, std::pair{&options.sep_token, "sep_token"}})
    BRISK_CHECK(m->vocab.contains(*name), "BertTokenizer: '", source, "' has no ", json::quote(*name),
                " token, which BERT's template [CLS] text [SEP] needs (BertTokenizerOptions::", what,
                " names it if the vocabulary calls it otherwise)");
  m->set_bert_template(m->cls_id, m->sep_id);
  return BertTokenizer(std::move(m));
}

BertTokenizer BertTokenizer::from_vocab_file(const std::string& vocab_txt_path, const BertTokenizerOptions& options) {
  std::string text = read_whole_file(vocab_txt_path, "BertTokenizer::from_vocab_file");
  BRISK_CHECK(json::valid_utf8(text), "BertTokenizer: '", vocab_txt_path, "' is not UTF-8 text");
  return from_vocab(vocab_lines(text), options, vocab_txt_path);
}

BertTokenizer BertTokenizer::from_tokenizer_json(const std::string& path, const BertTokenizerOptions& options) {
  return from_tokenizer_json_string(read_whole_file(path, "BertTokenizer::from_tokenizer_json"), options, path);
}

BertTokenizer BertTokenizer::from_tokenizer_json_string(std::string_view json, const BertTokenizerOptions& options,
                                                        const std::string& source) {
  std::shared_ptr<Impl> m = parse_tokenizer_json(json, options, source);
  m->finish();
  return BertTokenizer(std::move(m));
}

BertTokenizer BertTokenizer::from_pretrained(const std::string& dir) {
  std::error_code ec;
  BRISK_CHECK(
      fs::is_directory(dir, ec), "BertTokenizer::from_pretrained: '", dir,
      "' is not a folder (a Hugging Face model folder with vocab.txt or tokenizer.json; brisk downloads nothing)");
  const fs::path root(dir);
  const std::string config_path = (root / "tokenizer_config.json").string();
  const std::string json_path = (root / "tokenizer.json").string();
  const std::string vocab_path = (root / "vocab.txt").string();
  BertTokenizerOptions options;
  ConfigNormalization norm;
  if (fs::exists(config_path, ec)) options = read_tokenizer_config(config_path, options, norm);
  if (fs::exists(json_path, ec)) {
    std::shared_ptr<Impl> m =
        parse_tokenizer_json(read_whole_file(json_path, "BertTokenizer::from_pretrained"), options, json_path);
    // transformers' BertTokenizerFast puts tokenizer_config.json's settings into the normalizer.
    if (m->has_normalizer) {
      BertNormalization& n = m->options.normalization;
      if (norm.lowercase) n.lowercase = *norm.lowercase;
      if (norm.handle_chinese_chars) n.handle_chinese_chars = *norm.handle_chinese_chars;
      if (norm.has_strip_accents) n.strip_accents = norm.strip_accents;
      m->flags = resolve_normalization(n);
    }
    m->source = dir;
    m->finish();
    return BertTokenizer(std::move(m));
  }
  if (fs::exists(vocab_path, ec)) {
    BertNormalization& n = options.normalization;
    n.lowercase = norm.lowercase.value_or(true);  // transformers' BertTokenizer: do_lower_case=True
    n.handle_chinese_chars = norm.handle_chinese_chars.value_or(true);
    n.strip_accents = norm.strip_accents;
    return from_vocab_file(vocab_path, options);
  }
  const bool bpe = fs::exists(root / "vocab.json", ec) || fs::exists(root / "merges.txt", ec);
  BRISK_THROW(
      "BertTokenizer::from_pretrained: '", dir, "' has neither tokenizer.json nor vocab.txt",
      bpe ? " (its vocab.json / merges.txt are a byte-level BPE tokenizer's: GPT2Tokenizer::from_pretrained reads them)"
          : "");
}

void BertTokenizer::save_pretrained(const std::string& dir) const {
  const Impl& m = *impl_;
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRISK_CHECK(!ec && fs::is_directory(dir), "BertTokenizer::save_pretrained: cannot create the folder '", dir,
              "': ", ec.message());
  const fs::path root(dir);
  // vocab.txt: the WordPiece vocabulary in id order (added tokens past it live in tokenizer.json).
  std::vector<const std::string*> by_id(m.tokens.size(), nullptr);
  for (const auto& [token, id] : m.vocab) by_id[static_cast<size_t>(id)] = &token;
  std::string vocab_txt;
  for (const std::string* t : by_id)
    if (t != nullptr) vocab_txt += *t + "\n";
  io::write_file_atomic((root / "vocab.txt").string(), vocab_txt, "BertTokenizer::save_pretrained");
  io::write_file_atomic((root / "tokenizer.json").string(), tokenizer_json(m).dump(2) + "\n",
                        "BertTokenizer::save_pretrained");
  const BertNormalization n = normalization();
  const BertTokenizerOptions& o = m.options;
  json::Value specials = json::Value::object();
  for (auto [key, name, id] :
       {std::tuple{"cls_token", &o.cls_token, m.cls_id}, std::tuple{"mask_token", &o.mask_token, m.mask_id},
        std::tuple{"pad_token", &o.pad_token, m.pad_id}, std::tuple{"sep_token", &o.sep_token, m.sep_id},
        std::tuple{"unk_token", &o.unk_token, m.unk_id}})
    if (id >= 0) specials.set(key, json::Value(*name));
  json::Value config = json::Value::object(
      {{"do_lower_case", json::Value(n.lowercase)},
       {"strip_accents", o.normalization.strip_accents ? json::Value(*o.normalization.strip_accents) : json::Value()},
       {"tokenize_chinese_chars", json::Value(n.handle_chinese_chars)},
       {"clean_up_tokenization_spaces", json::Value(o.clean_up_tokenization_spaces)}});
  if (o.model_max_length > 0) config.set("model_max_length", json::Value(o.model_max_length));
  for (const auto& [key, value] : specials.items()) config.set(key, value);
  config.set("tokenizer_class", json::Value("BertTokenizer"));
  io::write_file_atomic((root / "tokenizer_config.json").string(), config.dump(2) + "\n",
                        "BertTokenizer::save_pretrained");
  io::write_file_atomic((root / "special_tokens_map.json").string(), specials.dump(2) + "\n",
                        "BertTokenizer::save_pretrained");
}

}  // namespace brisk::data
