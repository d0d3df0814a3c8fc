// text_classification's default mode, Hugging Face's run_glue in C++: a BERT (a folder, or a shape
// from scratch) fine-tuned by the Trainer to tell which fortune file a quote comes from, evaluated
// each epoch beside the majority-class baseline, then saved with save_pretrained (model, config with
// id2label, tokenizer) so that transformers and brisk load it back.
#include <brisk/accelerate/trainer.h>
#include <brisk/util/fs.h>

#include <filesystem>

#include <cmath>
#include <cstdio>

#include "bert_setup.h"
#include "fortunes.h"
#include "modes.h"
#include "text_datasets.h"

using namespace brisk;

namespace {

TrainingArguments default_training_args() {
  TrainingArguments a;
  a.output_dir = "out/text_classification";
  a.num_train_epochs = 3;
  a.per_device_train_batch_size = 32;
  a.per_device_eval_batch_size = 64;
  a.learning_rate = 1e-4;
  a.warmup_ratio = 0.1;
  a.logging_steps = 50;
  a.eval_strategy = IntervalStrategy::Epoch;
  a.save_strategy = IntervalStrategy::No;
  return a;
}

struct Classifier {
  std::unique_ptr<models::BertForSequenceClassification> model;
  std::string source;  // one line: where the weights came from
  std::string report;  // the load report, for a folder
};

// From --model_name_or_path (a new classifier for the task's labels), or from scratch.
Classifier build_classifier(const bert_setup::ModelArgs& args, const data::BertTokenizer& tokenizer,
                            const std::vector<std::string>& labels) {
  Classifier c;
  if (!args.model_name_or_path.empty()) {
    auto [model, report] =
        models::BertForSequenceClassification::from_pretrained(args.model_name_or_path, {.labels = labels});
    BRISK_CHECK(model->bert.config.vocab_size >= tokenizer.vocab_size(),
                "--model_name_or_path: the model's vocab_size ", model->bert.config.vocab_size,
                " is smaller than the tokenizer's ", tokenizer.vocab_size());
    c.model = std::move(model);
    c.source = "weights from " + args.model_name_or_path;
    c.report = report.str();
    return c;
  }
  models::BertConfig config = bert_setup::config_from_scratch(args, tokenizer);
  config.labels = labels;
  c.model = std::make_unique<models::BertForSequenceClassification>(config);
  c.source = "random weights (" + (args.config_name.empty() ? "preset " + args.preset : args.config_name) + ")";
  return c;
}

std::shared_ptr<text_data::LabelledTexts> dataset_of(const data::BertTokenizer& tokenizer,
                                                     const std::vector<fortunes::LabelledText>& texts,
                                                     int64_t max_length) {
  std::vector<std::string> strings;
  std::vector<int64_t> labels;
  for (const auto& t : texts) {
    strings.push_back(t.text);
    labels.push_back(t.label);
  }
  return std::make_shared<text_data::LabelledTexts>(text_data::encode(tokenizer, strings, max_length),
                                                    std::move(labels), tokenizer.pad_token_id());
}

Metrics accuracy(const EvalPrediction& e) {
  return {{"accuracy", mean(eq(argmax(e.predictions, 1), e.label_ids).to(DType::F64)).item<double>()}};
}

std::string epoch_text(const TrainerState& s) {
  char buf[64];
  const int64_t epochs = (s.max_steps + s.steps_per_epoch - 1) / s.steps_per_epoch;
  if (s.global_step % s.steps_per_epoch == 0)
    std::snprintf(buf, sizeof buf, "epoch %lld/%lld", static_cast<long long>(s.global_step / s.steps_per_epoch),
                  static_cast<long long>(epochs));
  else
    std::snprintf(buf, sizeof buf, "epoch %.2f/%lld", s.epoch, static_cast<long long>(epochs));
  return buf;
}

std::string metrics_line(const Metrics& m, const fortunes::Task& task) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "eval loss %.4f, eval accuracy %.4f, majority baseline %.4f (%lld texts)",
                m.at("eval_loss"), m.at("eval_accuracy"), task.majority_baseline,
                static_cast<long long>(m.at("eval_samples")));
  return buf;
}

// eval_results.json, as run_glue writes it, with the baseline and the labels beside the metrics.
void write_results(const std::string& dir, const Metrics& m, const fortunes::Task& task) {
  json::Value out = json::Value::object();
  for (const auto& [k, v] : m) out.set(k, v);
  out.set("majority_baseline", task.majority_baseline);
  json::Value labels = json::Value::array();
  for (const std::string& l : task.labels) labels.push_back(l);
  out.set("labels", labels);
  io::write_file_atomic(dir + "/eval_results.json", out.dump(2) + "\n", "text_classification");
}

int run(bert_setup::ModelArgs& margs, TrainingArguments& targs, const std::string& files, bool do_train) {
  if (margs.threads > 0) set_num_threads(margs.threads);
  fortunes::Task task = fortunes::load_task(margs.data_dir, cli::split_comma_list(files));
  std::vector<std::string> train_texts;
  for (const auto& t : task.train) train_texts.push_back(t.text);
  std::string tokenizer_how, length_note;
  data::BertTokenizer tokenizer = bert_setup::tokenizer_for(margs, train_texts, tokenizer_how);
  manual_seed(targs.seed);  // the initial weights (and a new classifier head)
  Classifier c = build_classifier(margs, tokenizer, task.labels);
  const int64_t max_length = bert_setup::max_length_for(margs, c.model->bert.config, length_note);
  auto train = dataset_of(tokenizer, task.train, max_length);
  auto test = dataset_of(tokenizer, task.test, max_length);

  bert_setup::ClassifierOnRows net(*c.model);
  auto loss = [&](const Tensor& logits, const Tensor& labels) { return c.model->loss(logits, labels); };
  Trainer trainer(net, targs, train, test, loss, accuracy);
  Accelerator& acc = trainer.accelerator();
  acc.print("text_classification: ", task.labels.size(), " fortune files (", files, "), ", task.train.size(),
            " training and ", task.test.size(), " test texts (", task.ambiguous, " in several files left out)");
  acc.print("tokenizer: ", tokenizer_how, "; texts cut to ", max_length, " tokens",
            length_note.empty() ? "" : " (" + length_note + ")");
  acc.print("model: BERT ", c.model->bert.config.num_hidden_layers, " layers x ", c.model->bert.config.hidden_size,
            ", ", net.num_parameters(), " parameters, ", c.source, "; ", bert_setup::run_line(acc, targs));
  if (!c.report.empty()) acc.print(c.report);
  bool in_training = false;  // the final evaluation prints its own line
  trainer.add_callback({.on_evaluate =
                            [&](const TrainerState& s, const Metrics& m) {
                              if (in_training) acc.print(epoch_text(s), ": ", metrics_line(m, task));
                            },
                        .on_log = bert_setup::print_training_loss(acc, targs)});
  if (do_train) {
    in_training = true;
    Metrics done = trainer.train();
    in_training = false;
    acc.print("train loss ", done.at("train_loss"), " over ", done.at("train_steps"), " steps");
  }
  const Metrics final_metrics = trainer.evaluate();
  acc.print("final: ", metrics_line(final_metrics, task));
  if (acc.is_main_process()) {
    std::filesystem::create_directories(targs.output_dir);
    write_results(targs.output_dir, final_metrics, task);
    if (do_train) {
      c.model->save_pretrained(targs.output_dir);
      tokenizer.save_pretrained(targs.output_dir);
    }
  }
  acc.wait_for_everyone();
  acc.print(do_train ? "saved " : "wrote ", targs.output_dir,
            do_train ? " (config.json with id2label, model.safetensors, tokenizer files, eval_results.json)"
                     : "/eval_results.json");
  return 0;
}

}  // namespace

int finetune_main(int argc, char** argv) {
  bert_setup::ModelArgs margs;
  TrainingArguments targs = default_training_args();
  std::string files = fortunes::kDefaultFiles;
  bool do_train = true;
  cli::Parser p("text_classification",
                "Fine-tunes BERT to tell which fortune file a quote comes from (Hugging Face's run_glue), with\n"
                "the Trainer; evaluates each epoch beside the majority-class baseline and saves the model with\n"
                "save_pretrained. `text_classification pretrain --help`: masked-language-model pretraining.");
  margs.add_flags(p);
  p.add("files", "the fortune files whose quotes are classified (comma-separated; the labels)", &files);
  p.add("do_train", "train (--do_train=false: only evaluate --model_name_or_path)", &do_train);
  targs.add_flags(p);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    margs.validate();
    BRISK_CHECK(do_train || !margs.model_name_or_path.empty(),
                "--do_train=false evaluates a trained model: give --model_name_or_path");
    return run(margs, targs, files, do_train);
  } catch (const Error& e) {
    std::fprintf(stderr, "text_classification: %s\n", e.message().c_str());
    return 1;
  }
}
