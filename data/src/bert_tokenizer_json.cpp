// Hugging Face tokenizers' tokenizer.json for a WordPiece (BERT) tokenizer: reading it into a
// BertTokenizer, and writing one back for save_pretrained.
#include <algorithm>

#include "bert_tokenizer_impl.h"
#include "brisk/util/error.h"

namespace brisk::data {

namespace {

// Errors name the file and the JSON path of the value ("model.vocab").
struct Reader {
  const std::string& source;

  [[noreturn]] void fail(std::string_view where, const std::string& what) const {
    BRISK_THROW("BertTokenizer: '", source, "': ", where, ": ", what);
  }
  const json::Value& at(const json::Value& obj, std::string_view where, std::string_view key) const {
    if (!obj.is_object()) fail(where, std::string("must be an object, not ") + json::type_name(obj.type()));
    const json::Value* v = obj.find(key);
    if (v == nullptr) fail(where, "has no \"" + std::string(key) + "\"");
    return *v;
  }
  std::string string(const json::Value& v, std::string_view where) const {
    if (!v.is_string()) fail(where, "must be a string, not " + v.dump());
    return v.as_string();
  }
  bool boolean(const json::Value& v, std::string_view where) const {
    if (!v.is_bool()) fail(where, "must be true or false, not " + v.dump());
    return v.as_bool();
  }
  int64_t integer(const json::Value& v, std::string_view where, int64_t lo, int64_t hi) const {
    if (!v.is_integer() || v.as_double() < static_cast<double>(lo) || v.as_double() > static_cast<double>(hi))
      fail(where, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not " + v.dump());
    return v.as_int();
  }
  // An optional boolean field: absent or null leaves `out` as it is.
  void flag(const json::Value& obj, std::string_view where, std::string_view key, bool& out) const {
    const json::Value* v = obj.find(key);
    if (v != nullptr && !v->is_null()) out = boolean(*v, std::string(where) + "." + std::string(key));
  }
};

void read_model(const Reader& r, const json::Value& model, BertTokenizer::Impl& m) {
  const std::string type = model.contains("type") ? r.string(model.at("type"), "model.type") : "WordPiece";
  if (type != "WordPiece")
    r.fail("model.type", json::quote(type) +
                             " is not a WordPiece model: BertTokenizer reads WordPiece (BERT) tokenizers" +
                             (type == "BPE" ? " (GPT2Tokenizer::from_pretrained reads byte-level BPE ones)" : ""));
  m.options.unk_token = r.string(r.at(model, "model", "unk_token"), "model.unk_token");
  if (const json::Value* p = model.find("continuing_subword_prefix"))
    m.options.continuing_subword_prefix = r.string(*p, "model.continuing_subword_prefix");
  if (const json::Value* p = model.find("max_input_chars_per_word"))
    m.options.max_input_chars_per_word = r.integer(*p, "model.max_input_chars_per_word", 1, INT32_MAX);
  const json::Value& vocab = r.at(model, "model", "vocab");
  if (!vocab.is_object()) r.fail("model.vocab", "must be an object of token -> id");
  const size_t n = vocab.size();
  if (n == 0) r.fail("model.vocab", "has no tokens");
  if (n >= static_cast<size_t>(INT32_MAX)) r.fail("model.vocab", "has too many tokens");
  m.tokens.assign(n, std::string());
  std::vector<uint8_t> have(n, 0);
  m.vocab.reserve(n);
  for (const auto& [token, id_value] : vocab.items()) {
    const std::string where = "model.vocab[" + json::quote(token) + "]";
    const int64_t id = r.integer(id_value, where, 0, static_cast<int64_t>(n) - 1);
    if (have[static_cast<size_t>(id)])
      r.fail(where, "id " + std::to_string(id) + " is also the id of " +
                        json::quote(m.tokens[static_cast<size_t>(id)]) + ": the ids must number the " +
                        std::to_string(n) + " tokens 0.." + std::to_string(n - 1));
    have[static_cast<size_t>(id)] = 1;
    m.tokens[static_cast<size_t>(id)] = token;
    m.vocab.emplace(token, static_cast<int32_t>(id));
  }
}

void read_normalizer(const Reader& r, const json::Value& v, BertTokenizer::Impl& m) {
  if (v.is_null()) {
    m.has_normalizer = false;
    return;
  }
  const std::string type = r.string(r.at(v, "normalizer", "type"), "normalizer.type");
  if (type != "BertNormalizer")
    r.fail("normalizer.type", json::quote(type) + " is not supported: BertTokenizer reads BertNormalizer (or null)");
  BertNormalization& n = m.options.normalization;
  r.flag(v, "normalizer", "clean_text", n.clean_text);
  r.flag(v, "normalizer", "handle_chinese_chars", n.handle_chinese_chars);
  r.flag(v, "normalizer", "lowercase", n.lowercase);
  n.strip_accents.reset();
  if (const json::Value* s = v.find("strip_accents"); s != nullptr && !s->is_null())
    n.strip_accents = r.boolean(*s, "normalizer.strip_accents");
  m.has_normalizer = true;
}

void read_pre_tokenizer(const Reader& r, const json::Value& v) {
  const std::string type = v.is_null() ? "null" : r.string(r.at(v, "pre_tokenizer", "type"), "pre_tokenizer.type");
  if (type != "BertPreTokenizer")
    r.fail("pre_tokenizer", json::quote(type) + " is not supported: BertTokenizer reads BertPreTokenizer");
}

std::vector<TemplatePiece> read_template(const Reader& r, const json::Value& v, const std::string& where,
                                         const json::Value& specials, bool pair) {
  if (!v.is_array()) r.fail(where, "must be an array of pieces");
  std::vector<TemplatePiece> out;
  int seen[2] = {0, 0};
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const json::Value& piece = v[i];
    TemplatePiece p;
    if (const json::Value* s = piece.is_object() ? piece.find("Sequence") : nullptr) {
      const std::string id = r.string(r.at(*s, w, "id"), w + ".Sequence.id");
      if (id != "A" && id != "B") r.fail(w, "sequence " + json::quote(id) + " is neither A nor B");
      p.sequence = id == "A" ? 0 : 1;
      ++seen[p.sequence];
      p.type_id = static_cast<int32_t>(r.integer(r.at(*s, w, "type_id"), w + ".Sequence.type_id", 0, INT32_MAX));
    } else if (const json::Value* t = piece.is_object() ? piece.find("SpecialToken") : nullptr) {
      const std::string id = r.string(r.at(*t, w, "id"), w + ".SpecialToken.id");
      p.type_id = static_cast<int32_t>(r.integer(r.at(*t, w, "type_id"), w + ".SpecialToken.type_id", 0, INT32_MAX));
      const json::Value* spec = specials.is_object() ? specials.find(id) : nullptr;
      if (spec == nullptr) r.fail(w, "special token " + json::quote(id) + " is not in post_processor.special_tokens");
      const json::Value& ids = r.at(*spec, "post_processor.special_tokens." + id, "ids");
      if (!ids.is_array() || ids.size() == 0) r.fail("post_processor.special_tokens." + id, "has no ids");
      for (size_t k = 0; k < ids.size(); ++k)
        p.ids.push_back(static_cast<int32_t>(r.integer(ids[k], "post_processor.special_tokens." + id, 0, INT32_MAX)));
    } else {
      r.fail(w, "is neither a Sequence nor a SpecialToken: " + piece.dump());
    }
    out.push_back(std::move(p));
  }
  if (seen[0] != 1 || seen[1] != (pair ? 1 : 0))
    r.fail(where, pair ? "must hold sequences A and B once each" : "must hold sequence A once and no B");
  return out;
}

void read_post_processor(const Reader& r, const json::Value& v, BertTokenizer::Impl& m) {
  if (v.is_null()) {
    m.has_template = false;
    return;
  }
  const std::string type = r.string(r.at(v, "post_processor", "type"), "post_processor.type");
  m.has_template = true;
  if (type == "TemplateProcessing") {
    const json::Value& specials = r.at(v, "post_processor", "special_tokens");
    m.single = read_template(r, r.at(v, "post_processor", "single"), "post_processor.single", specials, false);
    m.pair = read_template(r, r.at(v, "post_processor", "pair"), "post_processor.pair", specials, true);
    return;
  }
  if (type == "BertProcessing") {
    int32_t ids[2];
    const char* keys[2] = {"sep", "cls"};
    for (int k = 0; k < 2; ++k) {
      const std::string w = std::string("post_processor.") + keys[k];
      const json::Value& t = r.at(v, "post_processor", keys[k]);
      if (!t.is_array() || t.size() != 2) r.fail(w, "must be [token, id], not " + t.dump());
      (k == 0 ? m.options.sep_token : m.options.cls_token) = r.string(t[0], w);
      ids[k] = static_cast<int32_t>(r.integer(t[1], w, 0, INT32_MAX));
    }
    m.set_bert_template(ids[1], ids[0]);
    return;
  }
  r.fail("post_processor.type",
         json::quote(type) + " is not supported: BertTokenizer reads TemplateProcessing, BertProcessing (or null)");
}

void read_decoder(const Reader& r, const json::Value& v, BertTokenizer::Impl& m) {
  if (v.is_null()) {
    m.has_decoder = false;
    return;
  }
  const std::string type = r.string(r.at(v, "decoder", "type"), "decoder.type");
  if (type != "WordPiece")
    r.fail("decoder.type", json::quote(type) + " is not supported: BertTokenizer reads WordPiece");
  if (const json::Value* p = v.find("prefix");
      p != nullptr && r.string(*p, "decoder.prefix") != m.options.continuing_subword_prefix)
    r.fail("decoder.prefix", json::quote(p->as_string()) + " differs from the model's continuing_subword_prefix " +
                                 json::quote(m.options.continuing_subword_prefix));
  m.has_decoder = true;
  r.flag(v, "decoder", "cleanup", m.decoder_cleanup);
}

void read_added_tokens(const Reader& r, const json::Value& v, BertTokenizer::Impl& m) {
  if (v.is_null()) return;
  if (!v.is_array()) r.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string w = "added_tokens[" + std::to_string(i) + "]";
    const json::Value& t = v[i];
    AddedToken a;
    a.content = r.string(r.at(t, w, "content"), w + ".content");
    a.id = static_cast<int32_t>(r.integer(r.at(t, w, "id"), w + ".id", 0, INT32_MAX - 1));
    r.flag(t, w, "special", a.special);
    r.flag(t, w, "normalized", a.normalized);
    for (const char* key : {"single_word", "lstrip", "rstrip"}) {
      bool on = false;
      r.flag(t, w, key, on);
      if (on) r.fail(w, json::quote(a.content) + " has " + key + " true, which BertTokenizer does not support");
    }
    const size_t id = static_cast<size_t>(a.id);
    if (id < m.tokens.size()) {
      if (m.tokens[id] != a.content)
        r.fail(w, json::quote(a.content) + " has id " + std::to_string(id) + ", which is " + json::quote(m.tokens[id]) +
                      " in model.vocab");
      m.tokens[id] = a.content;
    } else if (id == m.tokens.size()) {
      m.tokens.push_back(a.content);  // a token past the vocabulary: it takes the next id
    } else {
      r.fail(w, json::quote(a.content) + " has id " + std::to_string(id) + ", leaving ids " +
                    std::to_string(m.tokens.size()) + ".." + std::to_string(id - 1) + " without a token");
    }
    m.added.push_back(std::move(a));
  }
}

}  // namespace

std::shared_ptr<BertTokenizer::Impl> parse_tokenizer_json(std::string_view text, const BertTokenizerOptions& options,
                                                          const std::string& source) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const Error& e) {
    BRISK_THROW("BertTokenizer: '", source, "' is not valid JSON: ", e.message());
  }
  const Reader r{source};
  if (!root.is_object()) r.fail("the top level", std::string("must be an object, not ") + json::type_name(root.type()));
  auto m = std::make_shared<BertTokenizer::Impl>();
  m->source = source;
  m->options = options;
  read_model(r, r.at(root, "the top level", "model"), *m);
  const json::Value null;
  auto part = [&](std::string_view key) -> const json::Value& {
    const json::Value* v = root.find(key);
    return v ? *v : null;
  };
  read_normalizer(r, part("normalizer"), *m);
  read_pre_tokenizer(r, part("pre_tokenizer"));
  read_post_processor(r, part("post_processor"), *m);
  read_decoder(r, part("decoder"), *m);
  read_added_tokens(r, part("added_tokens"), *m);
  m->flags = resolve_normalization(m->options.normalization);
  // The template's ids must be tokens.
  for (const auto* t : {&m->single, &m->pair})
    for (const TemplatePiece& p : *t)
      for (int32_t id : p.ids)
        if (static_cast<size_t>(id) >= m->tokens.size())
          r.fail("post_processor", "special token id " + std::to_string(id) + " is past the vocabulary (" +
                                       std::to_string(m->tokens.size()) + " tokens)");
  return m;
}

json::Value tokenizer_json(const BertTokenizer::Impl& m) {
  using json::Value;
  Value added = Value::array();
  std::vector<AddedToken> added_by_id = m.added;  // tokenizers lists them by id
  std::stable_sort(added_by_id.begin(), added_by_id.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const AddedToken& t : added_by_id)
    added.push_back(Value::object({{"id", Value(static_cast<int64_t>(t.id))},
                                   {"content", Value(t.content)},
                                   {"single_word", Value(false)},
                                   {"lstrip", Value(false)},
                                   {"rstrip", Value(false)},
                                   {"normalized", Value(t.normalized)},
                                   {"special", Value(t.special)}}));
  const BertNormalization& n = m.options.normalization;
  Value normalizer = m.has_normalizer
                         ? Value::object({{"type", Value("BertNormalizer")},
                                          {"clean_text", Value(n.clean_text)},
                                          {"handle_chinese_chars", Value(n.handle_chinese_chars)},
                                          {"strip_accents", n.strip_accents ? Value(*n.strip_accents) : Value()},
                                          {"lowercase", Value(n.lowercase)}})
                         : Value();
  Value post;
  if (m.has_template) {
    Value specials = Value::object();
    auto pieces = [&](const std::vector<TemplatePiece>& t) {
      Value out = Value::array();
      for (const TemplatePiece& p : t) {
        if (p.sequence >= 0) {
          out.push_back(
              Value::object({{"Sequence", Value::object({{"id", Value(p.sequence == 0 ? "A" : "B")},
                                                         {"type_id", Value(static_cast<int64_t>(p.type_id))}})}}));
          continue;
        }
        std::string name;
        Value ids = Value::array(), toks = Value::array();
        for (int32_t id : p.ids) {
          name += m.tokens[static_cast<size_t>(id)];
          ids.push_back(Value(static_cast<int64_t>(id)));
          toks.push_back(Value(m.tokens[static_cast<size_t>(id)]));
        }
        specials.set(name, Value::object({{"id", Value(name)}, {"ids", ids}, {"tokens", toks}}));
        out.push_back(Value::object(
            {{"SpecialToken",
              Value::object({{"id", Value(name)}, {"type_id", Value(static_cast<int64_t>(p.type_id))}})}}));
      }
      return out;
    };
    Value single = pieces(m.single), pair = pieces(m.pair);
    post = Value::object(
        {{"type", Value("TemplateProcessing")}, {"single", single}, {"pair", pair}, {"special_tokens", specials}});
  }
  Value decoder = m.has_decoder ? Value::object({{"type", Value("WordPiece")},
                                                 {"prefix", Value(m.options.continuing_subword_prefix)},
                                                 {"cleanup", Value(m.decoder_cleanup)}})
                                : Value();
  Value vocab = Value::object();
  std::vector<const std::string*> by_id(m.tokens.size(), nullptr);
  for (const auto& [token, id] : m.vocab) by_id[static_cast<size_t>(id)] = &token;
  for (size_t id = 0; id < by_id.size(); ++id)
    if (by_id[id] != nullptr) vocab.items().emplace_back(*by_id[id], Value(static_cast<int64_t>(id)));
  Value model = Value::object({{"type", Value("WordPiece")},
                               {"unk_token", Value(m.options.unk_token)},
                               {"continuing_subword_prefix", Value(m.options.continuing_subword_prefix)},
                               {"max_input_chars_per_word", Value(m.options.max_input_chars_per_word)},
                               {"vocab", vocab}});
  return Value::object({{"version", Value("1.0")},
                        {"truncation", Value()},
                        {"padding", Value()},
                        {"added_tokens", added},
                        {"normalizer", normalizer},
                        {"pre_tokenizer", Value::object({{"type", Value("BertPreTokenizer")}})},
                        {"post_processor", post},
                        {"decoder", decoder},
                        {"model", model}});
}

}  // namespace brisk::data
