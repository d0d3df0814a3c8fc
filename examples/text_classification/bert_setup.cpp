// Model and tokenizer sources for text_classification (bert_setup.h).
#include "bert_setup.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "wordpiece_vocab.h"

namespace bert_setup {

using namespace brisk;

void ModelArgs::add_flags(cli::Parser& p) {
  p.add("model_name_or_path",
        "a BERT folder (config.json, model.safetensors, vocab.txt or tokenizer.json) to start from",
        &model_name_or_path);
  p.add("config_name", "a folder whose config.json gives the shape of a model trained from scratch", &config_name);
  p.add("tokenizer_name", "a folder whose tokenizer files to use (default: the model's, else learned from the text)",
        &tokenizer_name);
  p.add("preset", "the shape from scratch without --config_name: tiny, mini or base", &preset);
  p.add("config_overrides", "changes to the shape from scratch: \"hidden_size=128,num_hidden_layers=2\"",
        &config_overrides);
  p.add("vocab_size", "tokens of a WordPiece vocabulary learned from the training text", &vocab_size);
  p.add("max_seq_length", "tokens per text after truncation, [CLS] and [SEP] included", &max_seq_length);
  p.add("data", "the fortunes folder", &data_dir);
  p.add("threads", "CPU threads per process (0: OMP_NUM_THREADS or all cores)", &threads);
}

namespace {

// A folder flag's value must be a folder: the error names the flag (the loaders' own errors name
// only the path).
void check_folder(const char* flag, const std::string& dir) {
  std::error_code ec;
  BRISK_CHECK(dir.empty() || std::filesystem::is_directory(dir, ec), "--", flag, ": \"", dir,
              "\" is not a folder (a Hugging Face model folder on disk; brisk downloads nothing)");
}

}  // namespace

void ModelArgs::validate() const {
  check_folder("model_name_or_path", model_name_or_path);
  check_folder("config_name", config_name);
  check_folder("tokenizer_name", tokenizer_name);
  const std::vector<std::string> presets = models::BertConfig::preset_names();
  if (std::find(presets.begin(), presets.end(), preset) == presets.end()) {
    std::string valid;
    for (const std::string& p : presets) valid += (valid.empty() ? "" : ", ") + p;
    BRISK_THROW("--preset: \"", preset, "\" is not a preset (valid: ", valid, ")");
  }
  BRISK_CHECK(threads >= 0, "--threads must be >= 0 (0: OMP_NUM_THREADS or all cores), got ", threads);
}

data::BertTokenizer tokenizer_for(const ModelArgs& args, std::span<const std::string> texts, std::string& how) {
  const std::string dir = !args.tokenizer_name.empty() ? args.tokenizer_name : args.model_name_or_path;
  if (!dir.empty()) {
    data::BertTokenizer tok = data::BertTokenizer::from_pretrained(dir);
    how = tok.name() + " from " + dir;
    return tok;
  }
  data::BertTokenizer tok = wordpiece::tokenizer_from_texts(texts, {.vocab_size = args.vocab_size});
  how = tok.name() + " learned from " + std::to_string(texts.size()) + " training texts";
  return tok;
}

void apply_overrides(models::BertConfig& c, const std::string& overrides) {
  const std::map<std::string, std::function<void(double)>> fields = {
      {"hidden_size", [&](double v) { c.hidden_size = static_cast<int64_t>(v); }},
      {"num_hidden_layers", [&](double v) { c.num_hidden_layers = static_cast<int64_t>(v); }},
      {"num_attention_heads", [&](double v) { c.num_attention_heads = static_cast<int64_t>(v); }},
      {"intermediate_size", [&](double v) { c.intermediate_size = static_cast<int64_t>(v); }},
      {"max_position_embeddings", [&](double v) { c.max_position_embeddings = static_cast<int64_t>(v); }},
      {"type_vocab_size", [&](double v) { c.type_vocab_size = static_cast<int64_t>(v); }},
      {"hidden_dropout_prob", [&](double v) { c.hidden_dropout_prob = v; }},
      {"attention_probs_dropout_prob", [&](double v) { c.attention_probs_dropout_prob = v; }},
      {"classifier_dropout", [&](double v) { c.classifier_dropout = v; }},
      {"initializer_range", [&](double v) { c.initializer_range = v; }},
      {"layer_norm_eps", [&](double v) { c.layer_norm_eps = v; }},
  };
  const std::vector<std::string> integers = {"hidden_size",       "num_hidden_layers",       "num_attention_heads",
                                             "intermediate_size", "max_position_embeddings", "type_vocab_size"};
  for (const std::string& item : cli::split_comma_list(overrides)) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    auto it = fields.find(key);
    if (it == fields.end() || eq == std::string::npos) {
      std::string known;
      for (const auto& [k, f] : fields) known += (known.empty() ? "" : ", ") + k;
      BRISK_THROW("--config_overrides: \"", item, "\" is not key=value with a key among ", known);
    }
    const std::string text = item.substr(eq + 1);
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    const bool integer = std::find(integers.begin(), integers.end(), key) != integers.end();
    BRISK_CHECK(ec == std::errc() && end == text.data() + text.size() &&
                    (!integer || (v >= 1 && v <= 1e9 && v == static_cast<int64_t>(v))),
                "--config_overrides: ", key, " must be ", integer ? "an integer in [1, 1e9]" : "a number", ", got \"",
                text, "\"");
    it->second(v);
  }
}

models::BertConfig config_from_scratch(const ModelArgs& args, const data::BertTokenizer& tokenizer) {
  models::BertConfig c = args.config_name.empty() ? models::BertConfig::preset(args.preset)
                                                  : models::BertConfig::from_pretrained(args.config_name);
  apply_overrides(c, args.config_overrides);
  if (args.config_name.empty()) {
    c.vocab_size = tokenizer.vocab_size();
    c.pad_token_id = tokenizer.pad_token_id();
  }
  BRISK_CHECK(c.vocab_size >= tokenizer.vocab_size(), "--config_name: the config's vocab_size ", c.vocab_size, " (",
              args.config_name, ") is smaller than the tokenizer's ", tokenizer.vocab_size(),
              ": give the --tokenizer_name the config was made for");
  c.validate();
  return c;
}

int64_t max_length_for(const ModelArgs& args, const models::BertConfig& config, std::string& note) {
  BRISK_CHECK(args.max_seq_length >= 3, "--max_seq_length must be >= 3 ([CLS], a token, [SEP]), got ",
              args.max_seq_length);
  if (args.max_seq_length <= config.max_position_embeddings) return args.max_seq_length;
  note = "--max_seq_length " + std::to_string(args.max_seq_length) + " is more than the model's " +
         std::to_string(config.max_position_embeddings) + " positions: using " +
         std::to_string(config.max_position_embeddings);
  return config.max_position_embeddings;
}

std::string run_line(Accelerator& acc, const TrainingArguments& args) {
  return std::to_string(acc.num_processes()) + " process(es) x batch " +
         std::to_string(args.per_device_train_batch_size) + " on " + acc.device().str() + ", mixed precision " +
         std::string(enum_name(acc.mixed_precision())) + ", " + std::to_string(get_num_threads()) +
         " thread(s) per process";
}

std::function<void(const TrainerState&, const Metrics&)> print_training_loss(Accelerator& acc,
                                                                             const TrainingArguments& args) {
  if (!args.disable_tqdm) return nullptr;
  return [&acc](const TrainerState& s, const Metrics& m) {
    auto loss = m.find("loss");
    auto lr = m.find("learning_rate");
    if (loss == m.end() || lr == m.end()) return;
    char buf[128];
    std::snprintf(buf, sizeof buf, "step %lld: loss %.4f, learning rate %.3g", static_cast<long long>(s.global_step),
                  loss->second, lr->second);
    acc.print(buf);
  };
}

}  // namespace bert_setup
