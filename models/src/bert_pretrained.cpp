// BERT's Hugging Face folders: config.json <-> BertConfig, the overrides of from_pretrained, and
// which of transformers' tensor names each BERT class loads, initialises or ignores
// (docs/pretrained.md has the table).
#include <algorithm>
#include <filesystem>
#include <set>

#include "brisk/models/bert.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "hf_config.h"
#include "hf_weights.h"

namespace brisk::models {

namespace {

const std::vector<std::string> kBertArchitectures = {"BertModel", "BertForPreTraining", "BertForMaskedLM",
                                                     "BertForSequenceClassification"};

const std::vector<std::pair<std::string, BertActivation>> kActivations = {
    {"gelu", BertActivation::Gelu},
    {"gelu_new", BertActivation::GeluNew},
    {"gelu_pytorch_tanh", BertActivation::GeluPytorchTanh},
    {"relu", BertActivation::Relu}};
const std::vector<std::pair<std::string, BertProblemType>> kProblemTypes = {
    {"regression", BertProblemType::Regression},
    {"single_label_classification", BertProblemType::SingleLabel},
    {"multi_label_classification", BertProblemType::MultiLabel}};

template <class E>
std::vector<std::string> names_of(const std::vector<std::pair<std::string, E>>& table) {
  std::vector<std::string> out;
  out.reserve(table.size());
  for (const auto& [name, value] : table) out.push_back(name);
  return out;
}
template <class E>
E value_of(const std::vector<std::pair<std::string, E>>& table, const std::string& name) {
  return std::find_if(table.begin(), table.end(), [&](const auto& p) { return p.first == name; })->second;
}
template <class E>
std::string name_of(const std::vector<std::pair<std::string, E>>& table, E value) {
  return std::find_if(table.begin(), table.end(), [&](const auto& p) { return p.second == value; })->first;
}

// id2label = {"0": name, "1": name, ...}: every id from 0 to n-1 once.
std::vector<std::string> read_labels(hf::ConfigReader& r, const json::Value& map) {
  if (!map.is_object() || map.size() == 0) r.fail("id2label", "must be a non-empty object {\"0\": label, ...}");
  std::vector<std::string> labels(map.size());
  std::vector<bool> seen(map.size(), false);
  for (const auto& [key, value] : map.items()) {
    const bool digits = !key.empty() && key.size() <= 9 && std::all_of(key.begin(), key.end(), ::isdigit) &&
                        (key == "0" || key[0] != '0');
    const size_t id = digits ? std::stoul(key) : map.size();
    if (id >= map.size() || seen[id])
      r.fail("id2label",
             "must map each id 0 ... " + std::to_string(map.size() - 1) + " once (bad key \"" + key + "\")");
    if (!value.is_string()) r.fail("id2label", "must map ids to label strings");
    labels[id] = value.as_string();
    seen[id] = true;
  }
  return labels;
}

// transformers' BertConfig defaults stand in for absent keys (its config.json leaves out the values
// equal to PretrainedConfig's defaults, such as the two default labels).
BertConfig read_config(hf::ConfigReader& r) {
  hf::check_model_kind(r, "bert", kBertArchitectures);
  BertConfig c;
  c.vocab_size = r.integer("vocab_size", c.vocab_size, 1, hf::kMaxConfigSize);
  c.hidden_size = r.integer("hidden_size", c.hidden_size, 1, hf::kMaxConfigSize);
  c.num_hidden_layers = r.integer("num_hidden_layers", c.num_hidden_layers, 1, 100000);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads, 1, c.hidden_size);
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail("hidden_size", detail::str_cat("must be divisible by num_attention_heads (", c.num_attention_heads, ")"));
  c.intermediate_size = r.integer("intermediate_size", c.intermediate_size, 1, hf::kMaxConfigSize);
  c.hidden_act = value_of(kActivations, r.choice("hidden_act", "gelu", names_of(kActivations)));
  c.hidden_dropout_prob = r.number("hidden_dropout_prob", c.hidden_dropout_prob, 0, 1, true);
  c.attention_probs_dropout_prob = r.number("attention_probs_dropout_prob", c.attention_probs_dropout_prob, 0, 1, true);
  c.classifier_dropout = r.optional_number("classifier_dropout", 0, 1, true);
  c.max_position_embeddings = r.integer("max_position_embeddings", c.max_position_embeddings, 1, hf::kMaxConfigSize);
  c.type_vocab_size = r.integer("type_vocab_size", c.type_vocab_size, 1, hf::kMaxConfigSize);
  c.initializer_range = r.number("initializer_range", c.initializer_range, 0, 1000);
  c.layer_norm_eps = r.number("layer_norm_eps", c.layer_norm_eps, 0, 1);
  if (c.layer_norm_eps <= 0) r.fail("layer_norm_eps", "must be positive");
  c.pad_token_id = r.optional_integer("pad_token_id", 0, 0, c.vocab_size - 1);
  if (const json::Value* map = r.raw("id2label")) c.labels = read_labels(r, *map);
  for (const char* key : {"num_labels", "_num_labels"})
    if (auto n = r.optional_integer(key, std::nullopt, 1, 1'000'000)) {
      if (r.raw("id2label") && *n != c.num_labels())
        r.fail(key, detail::str_cat("must equal the number of labels in id2label (", c.num_labels(), ")"));
      if (!r.raw("id2label")) c.set_num_labels(*n);
    }
  if (const json::Value* map = r.raw("label2id")) {  // written back as id2label's inverse
    bool ok = map->is_object();
    for (const auto& kv : ok ? map->items() : json::Value::Object{}) ok = ok && kv.second.is_integer();
    if (!ok) r.fail("label2id", "must be an object {label: id}");
  }
  std::set<std::string> unique(c.labels.begin(), c.labels.end());
  if (unique.size() != c.labels.size()) r.fail("id2label", "must give each id a different label");
  if (const json::Value* p = r.raw("problem_type"); p && !p->is_null())
    c.problem_type = value_of(kProblemTypes, r.choice("problem_type", "", names_of(kProblemTypes)));
  r.require("position_embedding_type", "absolute", "brisk's BERT has absolute position embeddings");
  r.require("is_decoder", false, "brisk's BERT is an encoder (no causal mask)");
  r.require("add_cross_attention", false, "brisk's BERT has no cross-attention");
  r.require("tie_word_embeddings", true, "brisk's masked-LM decoder is the word embedding");
  r.raw("torch_dtype");  // the saved dtype: brisk loads into its own, and writes its own
  c.other_keys = r.other_keys();
  return c;
}

// The folder's config with the caller's overrides; *folder_labels: the folder's num_labels.
BertConfig read_with_overrides(const std::string& dir, const std::string& who, const BertPretrainedOptions& o,
                               int64_t* folder_labels = nullptr) {
  hf::ConfigReader r(dir, who);
  BertConfig c = read_config(r);
  if (folder_labels) *folder_labels = c.num_labels();
  if (o.labels) {
    BRISK_CHECK(!o.num_labels || *o.num_labels == static_cast<int64_t>(o.labels->size()), who, ": options.num_labels (",
                *o.num_labels, ") and options.labels (", o.labels->size(), ") disagree");
    c.labels = *o.labels;
  } else if (o.num_labels && *o.num_labels != c.num_labels()) {
    BRISK_CHECK(*o.num_labels >= 1, who, ": options.num_labels must be >= 1, got ", *o.num_labels);
    c.set_num_labels(*o.num_labels);
  }
  if (o.hidden_dropout_prob) c.hidden_dropout_prob = *o.hidden_dropout_prob;
  if (o.attention_probs_dropout_prob) c.attention_probs_dropout_prob = *o.attention_probs_dropout_prob;
  if (o.classifier_dropout) c.classifier_dropout = *o.classifier_dropout;
  return c;
}

// The model's tensors under transformers' names: "bert."-children of a head model are the base.
std::vector<hf::Binding> bindings(const nn::Module& top, bool head_model) {
  std::vector<hf::Binding> out;
  for (const auto& [name, t] : top.named_parameters()) {
    const bool base = !head_model || name.rfind("bert.", 0) == 0;
    out.push_back({.name = head_model && base ? name.substr(5) : name, .target = t, .base = base});
  }
  return out;
}

// The tensors a folder may lack (their model had no such part): they keep transformers' init.
void mark_heads(std::vector<hf::Binding>& b, const std::string& classifier_replaced) {
  for (hf::Binding& x : b) {
    if (x.name.rfind("pooler.", 0) == 0)
      x.may_initialise = "the folder has no pooler (its model had none, as BertForMaskedLM)";
    else if (x.name.rfind("classifier.", 0) == 0)
      (classifier_replaced.empty() ? x.may_initialise : x.replace) =
          classifier_replaced.empty() ? "a new classification head (the folder has none)" : classifier_replaced;
    else if (x.name.rfind("cls.predictions.", 0) == 0)
      x.may_initialise = "a new masked-LM head (the folder has none)";
  }
}

hf::Family family(const std::string& model_class, bool head_model) {
  hf::Family f{.model_class = model_class, .prefix = "bert.", .save_with_prefix = head_model};
  if (model_class == "BertForMaskedLM")
    f.tied = {{"cls.predictions.decoder.weight", "embeddings.word_embeddings.weight"},
              {"cls.predictions.decoder.bias", "cls.predictions.bias"}};
  f.ignorable = [model_class](const std::string& n) -> std::string {
    if (n == "embeddings.position_ids" || n == "embeddings.token_type_ids") return "a buffer brisk computes";
    if (n.rfind("pooler.", 0) == 0) return "the pooler, which " + model_class + " does not have";
    if (n.rfind("cls.", 0) == 0) return "a pretraining head (masked LM, next sentence) " + model_class + " lacks";
    if (n.rfind("classifier.", 0) == 0) return "a classification head, which " + model_class + " does not have";
    return "";
  };
  return f;
}

json::Value config_keys(const BertConfig& c, const std::string& architecture, DType dtype) {
  json::Value id2label = json::Value::object(), label2id = json::Value::object();
  std::vector<std::pair<std::string, int64_t>> by_name;
  for (size_t i = 0; i < c.labels.size(); ++i) {
    id2label.set(std::to_string(i), c.labels[i]);
    by_name.emplace_back(c.labels[i], static_cast<int64_t>(i));
  }
  std::sort(by_name.begin(), by_name.end());
  for (const auto& [name, id] : by_name) label2id.set(name, id);
  json::Value k = json::Value::object();
  k.set("architectures", json::Value::array({architecture}));
  k.set("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  k.set("classifier_dropout", c.classifier_dropout ? json::Value(*c.classifier_dropout) : json::Value());
  k.set("hidden_act", name_of(kActivations, c.hidden_act));
  k.set("hidden_dropout_prob", c.hidden_dropout_prob);
  k.set("hidden_size", c.hidden_size);
  k.set("id2label", id2label);
  k.set("initializer_range", c.initializer_range);
  k.set("intermediate_size", c.intermediate_size);
  k.set("label2id", label2id);
  k.set("layer_norm_eps", c.layer_norm_eps);
  k.set("max_position_embeddings", c.max_position_embeddings);
  k.set("model_type", "bert");
  k.set("num_attention_heads", c.num_attention_heads);
  k.set("num_hidden_layers", c.num_hidden_layers);
  k.set("pad_token_id", c.pad_token_id ? json::Value(*c.pad_token_id) : json::Value());
  k.set("position_embedding_type", "absolute");
  if (c.problem_type != BertProblemType::Auto) k.set("problem_type", name_of(kProblemTypes, c.problem_type));
  k.set("torch_dtype", hf::torch_dtype_name(dtype));
  k.set("type_vocab_size", c.type_vocab_size);
  k.set("vocab_size", c.vocab_size);
  return k;
}

void save(const nn::Module& top, const BertConfig& c, const std::string& model_class, bool head_model,
          const std::string& dir, const SaveOptions& options) {
  const std::vector<hf::Binding> b = bindings(top, head_model);
  hf::save_weights(dir, b, family(model_class, head_model), options.max_shard_size);
  io::write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                        hf::config_text(config_keys(c, model_class, hf::weights_dtype(b)), c.other_keys),
                        (model_class + "::save_pretrained").c_str());
}

}  // namespace

BertConfig BertConfig::from_pretrained(const std::string& dir) {
  hf::ConfigReader r(dir, "BertConfig::from_pretrained");
  return read_config(r);
}

Pretrained<BertModel> BertModel::from_pretrained(const std::string& dir, const BertPretrainedOptions& options) {
  auto model = std::make_unique<BertModel>(read_with_overrides(dir, "BertModel::from_pretrained", options));
  std::vector<hf::Binding> b = bindings(*model, false);
  mark_heads(b, "");
  LoadReport report = hf::load_weights(dir, b, family("BertModel", false), options.allow_unexpected);
  return {std::move(model), std::move(report)};
}

void BertModel::save_pretrained(const std::string& dir, const SaveOptions& options) const {
  save(*this, config, "BertModel", false, dir, options);
}

Pretrained<BertForSequenceClassification> BertForSequenceClassification::from_pretrained(
    const std::string& dir, const BertPretrainedOptions& options) {
  const char* who = "BertForSequenceClassification::from_pretrained";
  int64_t folder_labels = 0;
  BertConfig c = read_with_overrides(dir, who, options, &folder_labels);
  auto model = std::make_unique<BertForSequenceClassification>(std::move(c));
  std::vector<hf::Binding> b = bindings(*model, true);
  const int64_t n = model->bert.config.num_labels();
  mark_heads(b, n == folder_labels ? std::string()
                                   : detail::str_cat("a new classification head for num_labels ", n,
                                                     " (the folder's config has ", folder_labels, ")"));
  LoadReport report = hf::load_weights(dir, b, family("BertForSequenceClassification", true), options.allow_unexpected);
  return {std::move(model), std::move(report)};
}

void BertForSequenceClassification::save_pretrained(const std::string& dir, const SaveOptions& options) const {
  save(*this, bert.config, "BertForSequenceClassification", true, dir, options);
}

Pretrained<BertForMaskedLM> BertForMaskedLM::from_pretrained(const std::string& dir,
                                                             const BertPretrainedOptions& options) {
  auto model = std::make_unique<BertForMaskedLM>(read_with_overrides(dir, "BertForMaskedLM::from_pretrained", options));
  std::vector<hf::Binding> b = bindings(*model, true);
  mark_heads(b, "");
  LoadReport report = hf::load_weights(dir, b, family("BertForMaskedLM", true), options.allow_unexpected);
  return {std::move(model), std::move(report)};
}

void BertForMaskedLM::save_pretrained(const std::string& dir, const SaveOptions& options) const {
  save(*this, bert.config, "BertForMaskedLM", true, dir, options);
}

}  // namespace brisk::models
