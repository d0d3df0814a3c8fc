// from_pretrained / save_pretrained of GPT-2 and BERT beyond the numbers (those are in
// test_pretrained_reference.cpp): saving, loading and saving again gives the same bytes; the saved
// folders use transformers' names, layout and config keys; a new classifier head for another
// num_labels is initialised and reported; and every kind of bad folder is refused with an error
// that says what is wrong (missing tensor with the closest name, unexpected ones, shapes, model
// type, architectures, config values, tied copies, pickles), returning no model.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/errors.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::error_of;
using brisk::testing::expect_error;
using brisk::testing::read_file;
using brisk::testing::TempDir;
using brisk::testing::write_file;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  return std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/hf/" + name;
}

// A copy of a fixture folder to break.
std::string copy_fixture(const TempDir& dir, const std::string& name) {
  const std::string to = dir.path() + "/" + name;
  fs::copy(fixture(name), to, fs::copy_options::recursive);
  return to;
}

// The folder's model.safetensors after `edit` changed its tensors.
void edit_weights(const std::string& folder, const std::function<void(data::NamedTensors&)>& edit) {
  data::SafetensorsFile f = data::load_safetensors(folder + "/model.safetensors");
  data::NamedTensors t;
  for (const auto& [name, x] : f) t.emplace_back(name, x.clone());
  edit(t);
  data::save_safetensors(folder + "/model.safetensors", t);
}

void edit_config(const std::string& folder, const std::function<void(json::Value&)>& edit) {
  json::Value c = json::parse(read_file(folder + "/config.json"));
  edit(c);
  write_file(folder + "/config.json", c.dump(2));
}

data::NamedTensors::iterator find(data::NamedTensors& t, const std::string& name) {
  return std::find_if(t.begin(), t.end(), [&](const auto& kv) { return kv.first == name; });
}

// Every file of a folder, name -> bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = read_file(e.path().string());
  return out;
}

bool reported(const std::vector<models::ReportedTensor>& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& r) { return r.name == name; });
}

}  // namespace

// --- saving ---------------------------------------------------------------------------------

TEST(Pretrained, GPT2SaveLoadSaveGivesTheSameBytesInTransformersLayout) {
  TempDir dir;
  auto [model, report] = models::GPT2::from_pretrained(fixture("gpt2"));
  model->save_pretrained(dir.path() + "/one");
  auto again = models::GPT2::from_pretrained(dir.path() + "/one");
  again.model->save_pretrained(dir.path() + "/two");
  const auto one = files_of(dir.path() + "/one");
  EXPECT_EQ(one, files_of(dir.path() + "/two"));
  EXPECT_EQ(again.report.loaded, report.loaded);
  // transformers' names and Conv1D layout (in, out); the tied head and the buffers left out.
  const data::SafetensorsFile f = data::load_safetensors(dir.path() + "/one/model.safetensors");
  ASSERT_TRUE(f.contains("transformer.h.0.attn.c_attn.weight"));
  EXPECT_EQ(f.at("transformer.h.0.attn.c_attn.weight").sizes(), (Shape{16, 48}));
  EXPECT_FALSE(f.contains("lm_head.weight"));
  EXPECT_FALSE(f.contains("transformer.h.0.attn.bias"));
  EXPECT_EQ(f.size(), 28u);
  // The config: transformers' keys, and the keys brisk does not use kept.
  const json::Value c = json::parse(one.at("config.json"));
  EXPECT_EQ(c.at("model_type").as_string(), "gpt2");
  EXPECT_EQ(c.at("architectures")[0].as_string(), "GPT2LMHeadModel");
  EXPECT_EQ(c.at("n_embd").as_int(), 16);
  EXPECT_EQ(c.at("n_positions").as_int(), 16);
  EXPECT_EQ(c.at("torch_dtype").as_string(), "float32");
  EXPECT_EQ(c.at("task_specific_params").at("text-generation").at("max_length").as_int(), 50);
  EXPECT_EQ(c.at("bos_token_id").as_int(), 50);
}

TEST(Pretrained, GPT2FromScratchSavesAndLoadsBackTheSameModel) {
  TempDir dir;
  models::GPT2Config c = models::GPT2Config::preset("tiny");
  c.layer_norm_epsilon = 1e-6;
  models::GPT2 model(c);
  model.save_pretrained(dir.path());
  auto [back, report] = models::GPT2::from_pretrained(dir.path());
  EXPECT_EQ(back->config.layer_norm_epsilon, 1e-6);
  EXPECT_EQ(back->config.block_size, c.block_size);
  for (const auto& [name, p] : model.named_parameters())
    EXPECT_EQ(p.to_vector<float>(), back->get(name).to_vector<float>()) << name;
}

TEST(Pretrained, BertSaveLoadSaveGivesTheSameBytesForEveryClassAndShardedAboveTheLimit) {
  TempDir dir;
  const std::string d = dir.path();
  {
    auto [m, r] = models::BertModel::from_pretrained(fixture("bert"));
    m->save_pretrained(d + "/base1");
    models::BertModel::from_pretrained(d + "/base1").model->save_pretrained(d + "/base2");
    EXPECT_EQ(files_of(d + "/base1"), files_of(d + "/base2"));
    EXPECT_TRUE(data::load_safetensors(d + "/base1/model.safetensors").contains("embeddings.word_embeddings.weight"));
  }
  {
    auto [m, r] = models::BertForSequenceClassification::from_pretrained(fixture("bert_cls_sharded"));
    m->save_pretrained(d + "/cls1", {.max_shard_size = 8000});
    models::BertForSequenceClassification::from_pretrained(d + "/cls1")
        .model->save_pretrained(d + "/cls2", {.max_shard_size = 8000});
    const auto files = files_of(d + "/cls1");
    EXPECT_EQ(files, files_of(d + "/cls2"));
    EXPECT_TRUE(files.count("model.safetensors.index.json"));
    EXPECT_TRUE(files.count("model-00003-of-00003.safetensors"));
    const json::Value c = json::parse(files.at("config.json"));
    EXPECT_EQ(c.at("id2label").at("2").as_string(), "positive");
    EXPECT_EQ(c.at("label2id").at("neutral").as_int(), 1);
    EXPECT_EQ(c.at("architectures")[0].as_string(), "BertForSequenceClassification");
    const json::Value index = json::parse(files.at("model.safetensors.index.json"));
    EXPECT_TRUE(index.at("weight_map").contains("bert.pooler.dense.weight"));
    EXPECT_TRUE(index.at("weight_map").contains("classifier.bias"));
  }
  {
    auto [m, r] = models::BertForMaskedLM::from_pretrained(fixture("bert_pretraining_old"));
    m->save_pretrained(d + "/mlm1");
    models::BertForMaskedLM::from_pretrained(d + "/mlm1").model->save_pretrained(d + "/mlm2");
    EXPECT_EQ(files_of(d + "/mlm1"), files_of(d + "/mlm2"));
    const data::SafetensorsFile f = data::load_safetensors(d + "/mlm1/model.safetensors");
    EXPECT_TRUE(f.contains("cls.predictions.bias"));
    EXPECT_TRUE(f.contains("bert.embeddings.LayerNorm.weight"));  // the old gamma, under today's name
    EXPECT_FALSE(f.contains("cls.predictions.decoder.weight"));   // tied to the word embedding
    EXPECT_FALSE(f.contains("bert.pooler.dense.weight"));         // BertForMaskedLM has none
  }
}

// --- heads ----------------------------------------------------------------------------------

TEST(Pretrained, OtherNumLabelsMakesANewClassifierInitialisedAsTransformersAndReported) {
  auto [model, report] =
      models::BertForSequenceClassification::from_pretrained(fixture("bert_cls_sharded"), {.num_labels = 5});
  EXPECT_EQ(model->bert.config.num_labels(), 5);
  EXPECT_EQ(model->bert.config.labels[4], "LABEL_4");
  EXPECT_EQ(model->classifier.weight.sizes(), (Shape{5, 16}));
  EXPECT_TRUE(reported(report.initialized, "bert.classifier.weight") ||
              reported(report.initialized, "classifier.weight"));
  EXPECT_TRUE(reported(report.initialized, "classifier.bias"));
  EXPECT_TRUE(reported(report.ignored, "classifier.weight"));
  EXPECT_NE(report.str().find("num_labels 5 (the folder's config has 3)"), std::string::npos) << report.str();
  // transformers' init: weight N(0, initializer_range = 0.02), bias 0 (not the folder's values).
  const auto w = model->classifier.weight.to_vector<double>();
  double ss = 0;
  for (double v : w) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / static_cast<double>(w.size())), 0.02, 0.008);
  EXPECT_EQ(sum(abs(model->classifier.bias)).item<double>(), 0.0);
  // The body was loaded all the same: the same pooled output as with the folder's own head.
  auto own = models::BertForSequenceClassification::from_pretrained(fixture("bert_cls_sharded"));
  Tensor ids = full({1, 4}, 3, {.dtype = DType::I64});
  model->eval(), own.model->eval();
  EXPECT_EQ(std::get<1>(model->bert(ids, Tensor())).to_vector<float>(),
            std::get<1>(own.model->bert(ids, Tensor())).to_vector<float>());
}

TEST(Pretrained, ClassifierOnAPretrainingFolderGetsANewHeadAndIgnoresThePretrainingHeads) {
  auto [model, report] = models::BertForSequenceClassification::from_pretrained(
      fixture("bert_pretraining_old"), {.labels = std::vector<std::string>{"a", "b", "c", "d"}});
  EXPECT_EQ(model->bert.config.num_labels(), 4);
  EXPECT_TRUE(reported(report.initialized, "classifier.weight"));
  EXPECT_TRUE(reported(report.ignored, "cls.predictions.bias"));
  EXPECT_TRUE(reported(report.ignored, "cls.seq_relationship.weight"));
  EXPECT_TRUE(report.unexpected.empty());
  // A BertForMaskedLM folder has no pooler: BertModel initialises it and says so.
  TempDir dir;
  models::BertForMaskedLM::from_pretrained(fixture("bert_pretraining_old")).model->save_pretrained(dir.path());
  auto base = models::BertModel::from_pretrained(dir.path());
  EXPECT_TRUE(reported(base.report.initialized, "pooler.dense.weight"));
}

TEST(Pretrained, Bf16DefaultDtypeLoadsAnF32FolderIntoBf16) {
  set_default_dtype(DType::BF16);
  auto [model, report] = models::BertModel::from_pretrained(fixture("bert"));
  set_default_dtype(DType::F32);
  const Tensor& w = model->embeddings.word_embeddings.weight;
  EXPECT_EQ(w.dtype(), DType::BF16);
  const Tensor want = data::load_safetensors(fixture("bert/model.safetensors")).at("embeddings.word_embeddings.weight");
  EXPECT_EQ(w.to(DType::F32).to_vector<float>(), want.to(DType::BF16).to(DType::F32).to_vector<float>());
}

// --- refused folders --------------------------------------------------------------------------

TEST(Pretrained, MissingTensorIsNamedWithTheClosestNamePresent) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  edit_weights(f, [](data::NamedTensors& t) { t.erase(find(t, "encoder.layer.1.output.dense.weight")); });
  const std::string e = error_of([&] { models::BertModel::from_pretrained(f); });
  EXPECT_NE(e.find("missing \"encoder.layer.1.output.dense.weight\""), std::string::npos) << e;
  EXPECT_NE(e.find("closest name in the folder: \"encoder.layer.0.output.dense.weight\""), std::string::npos) << e;
  EXPECT_NE(e.find("nothing was loaded"), std::string::npos) << e;
}

TEST(Pretrained, UnexpectedTensorsAreListedUnlessAllowed) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  edit_weights(f, [](data::NamedTensors& t) {
    t.emplace_back("encoder.layer.2.output.dense.weight", zeros({16, 24}));
    t.emplace_back("adapter.weight", zeros({2}));
  });
  const std::string e = error_of([&] { models::BertModel::from_pretrained(f); });
  EXPECT_NE(e.find("encoder.layer.2.output.dense.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("adapter.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("allow_unexpected"), std::string::npos) << e;
  auto [model, report] = models::BertModel::from_pretrained(f, {.allow_unexpected = true});
  EXPECT_TRUE(reported(report.unexpected, "adapter.weight"));
  EXPECT_EQ(report.unexpected.size(), 2u);
}

TEST(Pretrained, ShapeMismatchNamesTheTensorAndBothShapes) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "gpt2");
  edit_weights(f, [](data::NamedTensors& t) {
    find(t, "transformer.h.1.mlp.c_fc.weight")->second = zeros({64, 16});  // nn.Linear's layout, not Conv1D's
  });
  const std::string e = error_of([&] { models::GPT2::from_pretrained(f); });
  EXPECT_NE(e.find("\"transformer.h.1.mlp.c_fc.weight\" is [64, 16] in model.safetensors, the model needs [16, 64]"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("missing"), std::string::npos) << e;  // not also reported missing
}

TEST(Pretrained, TiedCopyThatDiffersIsRefused) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "gpt2");
  edit_weights(f, [](data::NamedTensors& t) { find(t, "lm_head.weight")->second = zeros({51, 16}); });
  expect_error([&] { models::GPT2::from_pretrained(f); }, "\"lm_head.weight\" differs from \"transformer.wte.weight\"");
}

TEST(Pretrained, TiedCopyAloneStandsForTheTensorItCopies) {
  // Older masked-LM files hold the head's bias only as cls.predictions.decoder.bias.
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert_pretraining_old");
  Tensor bias;
  edit_weights(f, [&](data::NamedTensors& t) {
    auto it = find(t, "cls.predictions.bias");
    bias = it->second;
    t.emplace_back("cls.predictions.decoder.bias", bias);
    t.erase(find(t, "cls.predictions.bias"));
  });
  auto [model, report] = models::BertForMaskedLM::from_pretrained(f);
  EXPECT_TRUE(report.initialized.empty());
  EXPECT_EQ(model->bias.to_vector<float>(), bias.to(DType::F32).to_vector<float>());
}

TEST(Pretrained, OneTensorUnderTwoNamesIsRefused) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  edit_weights(f, [](data::NamedTensors& t) {
    t.emplace_back("bert.pooler.dense.bias", find(t, "pooler.dense.bias")->second.clone());
  });
  expect_error([&] { models::BertModel::from_pretrained(f); }, "name the same tensor");
}

TEST(Pretrained, IntegerWeightsAreRefused) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  edit_weights(
      f, [](data::NamedTensors& t) { find(t, "pooler.dense.bias")->second = zeros({16}, {.dtype = DType::I64}); });
  expect_error([&] { models::BertModel::from_pretrained(f); }, "\"pooler.dense.bias\" is I64");
}

TEST(Pretrained, UnknownModelTypeAndArchitecturesListWhatIsSupported) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  edit_config(f, [](json::Value& c) { c.set("model_type", "roberta"); });
  std::string e = error_of([&] { models::BertModel::from_pretrained(f); });
  EXPECT_NE(e.find("\"model_type\" is not a model type brisk reads (supported: \"bert\", \"gpt2\"), got \"roberta\""),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(f + "/config.json"), std::string::npos) << e;
  edit_config(f, [](json::Value& c) { c.set("model_type", "gpt2"); });
  expect_error([&] { models::BertModel::from_pretrained(f); }, "loads with models::GPT2::from_pretrained");
  expect_error([&] { models::GPT2::from_pretrained(fixture("bert")); }, "models::BertModel");
  edit_config(f, [](json::Value& c) {
    c.set("model_type", "bert");
    c.set("architectures", json::Value::array({"BertForQuestionAnswering"}));
  });
  e = error_of([&] { models::BertModel::from_pretrained(f); });
  EXPECT_NE(e.find("supported: BertModel, BertForPreTraining, BertForMaskedLM, BertForSequenceClassification"),
            std::string::npos)
      << e;
}

TEST(Pretrained, ConfigValuesOfTheWrongTypeOrRangeNameKeyValueAndFile) {
  struct Case {
    const char* key;
    json::Value value;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"num_hidden_layers", "2", "\"num_hidden_layers\" must be an integer in [1, 100000], got \"2\""},
      {"hidden_size", 16.5, "\"hidden_size\" must be an integer"},
      {"vocab_size", -3, "\"vocab_size\" must be an integer in [1, "},
      {"num_attention_heads", 3, "\"hidden_size\" must be divisible by num_attention_heads (3), got 16"},
      {"hidden_dropout_prob", 1.5, "\"hidden_dropout_prob\" must be a number in [0, 1), got 1.5"},
      {"layer_norm_eps", 0, "\"layer_norm_eps\" must be positive, got 0"},
      {"hidden_act", "swish", "\"hidden_act\" must be one of \"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\", \"relu\""},
      {"pad_token_id", 40, "\"pad_token_id\" must be an integer in [0, 39], got 40"},
      {"position_embedding_type", "relative_key", "\"position_embedding_type\" must be \"absolute\""},
      {"is_decoder", true, "\"is_decoder\" must be false"},
      {"id2label", json::Value::object({{"0", "a"}, {"2", "b"}}), "\"id2label\" must map each id 0 ... 1 once"},
      {"num_labels", 5, "\"num_labels\" must equal the number of labels in id2label (2)"},
      {"label2id", json::Value::array(), "\"label2id\" must be an object"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const std::string f = copy_fixture(dir, "bert");
    edit_config(f, [&](json::Value& cfg) {
      cfg.set(c.key, c.value);
      if (std::string(c.key) == "num_labels") cfg.set("id2label", json::Value::object({{"0", "x"}, {"1", "y"}}));
    });
    const std::string e = error_of([&] { models::BertModel::from_pretrained(f); });
    EXPECT_NE(e.find(c.says), std::string::npos) << c.key << ": " << e;
    EXPECT_NE(e.find(f + "/config.json"), std::string::npos) << e;
  }
  TempDir dir;
  const std::string f = copy_fixture(dir, "gpt2");
  edit_config(f, [](json::Value& c) { c.set("n_inner", 10); });
  expect_error([&] { models::GPT2::from_pretrained(f); }, "\"n_inner\" must be null or 4 * n_embd = 64");
  edit_config(f, [](json::Value& c) {
    c.set("n_inner", nullptr);
    c.set("attn_pdrop", 0.0);
  });
  expect_error([&] { models::GPT2::from_pretrained(f); }, "one dropout rate (or pass options.dropout)");
  EXPECT_EQ(models::GPT2::from_pretrained(f, {.dropout = 0.0}).model->config.dropout, 0.0);
  fs::remove(f + "/config.json");
  expect_error([&] { models::GPT2::from_pretrained(f); }, "config.json is missing");
  write_file(f + "/config.json", "{\"n_embd\": ");
  expect_error([&] { models::GPT2::from_pretrained(f); }, "config.json is not valid JSON");
}

TEST(Pretrained, PickleOnlyFolderIsRefusedWithTheWayToConvert) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert");
  fs::rename(f + "/model.safetensors", f + "/pytorch_model.bin");  // bytes that are not even a pickle
  const std::string e = error_of([&] { models::BertModel::from_pretrained(f); });
  EXPECT_NE(e.find("pytorch_model.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("unpickling a file runs whatever code it carries"), std::string::npos) << e;
  EXPECT_NE(e.find("save_pretrained(dir, safe_serialization=True)"), std::string::npos) << e;
}

TEST(Pretrained, ShardIndexEscapingTheFolderIsRefusedThroughFromPretrained) {
  TempDir dir;
  const std::string f = copy_fixture(dir, "bert_cls_sharded");
  json::Value index = json::parse(read_file(f + "/model.safetensors.index.json"));
  index["weight_map"].set("classifier.bias", "../bert/model.safetensors");
  write_file(f + "/model.safetensors.index.json", index.dump());
  expect_error([&] { models::BertForSequenceClassification::from_pretrained(f); },
               "names the shard \"../bert/model.safetensors\", which is not a file name in the folder");
  fs::remove(f + "/model-00002-of-00003.safetensors");
  index["weight_map"].set("classifier.bias", "model-00003-of-00003.safetensors");
  write_file(f + "/model.safetensors.index.json", index.dump());
  expect_error([&] { models::BertForSequenceClassification::from_pretrained(f); },
               "the shard model-00002-of-00003.safetensors that");
}
