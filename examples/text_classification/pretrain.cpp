// `text_classification pretrain`, Hugging Face's run_mlm in C++: a BERT learns the English of every
// fortune file (all but the classifier's test quotes) by predicting masked tokens, then is saved
// with save_pretrained, model and tokenizer, for the default mode's --model_name_or_path.
#include <brisk/accelerate/trainer.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bert_setup.h"
#include "fortunes.h"
#include "modes.h"
#include "text_datasets.h"

using namespace brisk;

namespace {

TrainingArguments default_training_args() {
  TrainingArguments a;
  a.output_dir = "out/bert_mlm";
  a.num_train_epochs = 4;
  a.per_device_train_batch_size = 32;
  a.per_device_eval_batch_size = 64;
  a.learning_rate = 5e-4;
  a.weight_decay = 0.01;
  a.warmup_ratio = 0.05;
  a.logging_steps = 50;
  a.eval_strategy = IntervalStrategy::Epoch;
  a.save_strategy = IntervalStrategy::No;
  a.prediction_loss_only = true;  // the logits of a validation set (texts x tokens x vocabulary) stay ungathered
  return a;
}

// The texts' encodings, without those that keep no token besides [CLS] and [SEP] (nothing to mask).
std::vector<data::Encoding> encoded(const data::BertTokenizer& tokenizer, const std::vector<std::string>& texts,
                                    int64_t max_length) {
  std::vector<data::Encoding> out;
  for (data::Encoding& e : text_data::encode(tokenizer, texts, max_length))
    if (static_cast<int64_t>(e.size()) > tokenizer.num_special_tokens_to_add(false)) out.push_back(std::move(e));
  return out;
}

// From --model_name_or_path (pretraining goes on), or from scratch; `source` and `report` say which.
std::unique_ptr<models::BertForMaskedLM> build_mlm(const bert_setup::ModelArgs& args,
                                                   const data::BertTokenizer& tokenizer, std::string& source,
                                                   std::string& report) {
  if (!args.model_name_or_path.empty()) {
    auto [model, load] = models::BertForMaskedLM::from_pretrained(args.model_name_or_path);
    source = "weights from " + args.model_name_or_path;
    report = load.str();
    return std::move(model);
  }
  source = "random weights (" + (args.config_name.empty() ? "preset " + args.preset : args.config_name) + ")";
  return std::make_unique<models::BertForMaskedLM>(bert_setup::config_from_scratch(args, tokenizer));
}

int run(bert_setup::ModelArgs& margs, TrainingArguments& targs, double mlm_probability) {
  if (margs.threads > 0) set_num_threads(margs.threads);
  fortunes::Corpus corpus = fortunes::load_pretraining_corpus(margs.data_dir);
  std::string tokenizer_how, source, report, length_note;
  data::BertTokenizer tokenizer = bert_setup::tokenizer_for(margs, corpus.train, tokenizer_how);
  BRISK_CHECK(tokenizer.mask_token_id() >= 0 && tokenizer.pad_token_id() >= 0, "the tokenizer (", tokenizer_how,
              ") has no [MASK] or no [PAD] token");
  manual_seed(targs.seed);  // the initial weights
  std::unique_ptr<models::BertForMaskedLM> model = build_mlm(margs, tokenizer, source, report);
  const int64_t max_length = bert_setup::max_length_for(margs, model->bert.config, length_note);
  text_data::MaskingOptions masking{.probability = mlm_probability,
                                    .mask_id = tokenizer.mask_token_id(),
                                    .pad_id = tokenizer.pad_token_id(),
                                    .vocab_size = tokenizer.vocab_size(),
                                    .seed = targs.seed};
  auto train = std::make_shared<text_data::MaskedTexts>(encoded(tokenizer, corpus.train, max_length), masking);
  masking.fixed = true;  // validation: the same masks at every evaluation
  auto val = std::make_shared<text_data::MaskedTexts>(encoded(tokenizer, corpus.validation, max_length), masking);

  bert_setup::MaskedLMOnRows net(*model);
  auto perplexity = [](const EvalPrediction& e) -> Metrics { return {{"perplexity", std::exp(e.loss)}}; };
  Trainer trainer(net, targs, train, val, models::BertForMaskedLM::loss, perplexity);
  Accelerator& acc = trainer.accelerator();
  acc.print("text_classification pretrain: ", train->size(), " training and ", val->size(), " validation texts from ",
            corpus.files, " fortune files (the classifier's test split left out)");
  acc.print("tokenizer: ", tokenizer_how, "; texts cut to ", max_length, " tokens",
            length_note.empty() ? "" : " (" + length_note + ")", "; ", mlm_probability * 100,
            "% of tokens masked (80% [MASK], 10% random, 10% kept)");
  acc.print("model: BERT ", model->bert.config.num_hidden_layers, " layers x ", model->bert.config.hidden_size, ", ",
            net.num_parameters(), " parameters, ", source, "; ", bert_setup::run_line(acc, targs));
  if (!report.empty()) acc.print(report);
  int64_t evaluated_at = -1;
  trainer.add_callback({.on_evaluate =
                            [&](const TrainerState& s, const Metrics& m) {
                              char buf[160];
                              std::snprintf(buf, sizeof buf, "step %lld (epoch %.2f): eval loss %.4f, perplexity %.2f",
                                            static_cast<long long>(s.global_step), s.epoch, m.at("eval_loss"),
                                            m.at("eval_perplexity"));
                              acc.print(buf);
                              evaluated_at = s.global_step;
                            },
                        .on_log = bert_setup::print_training_loss(acc, targs)});
  Metrics done = trainer.train();
  acc.print("train loss ", done.at("train_loss"), " over ", done.at("train_steps"), " steps");
  if (evaluated_at != trainer.state().global_step) trainer.evaluate();  // the saved model's validation loss
  if (acc.is_main_process()) {
    std::filesystem::create_directories(targs.output_dir);
    model->save_pretrained(targs.output_dir);
    tokenizer.save_pretrained(targs.output_dir);
  }
  acc.wait_for_everyone();
  acc.print("saved ", targs.output_dir, " (config.json, model.safetensors, tokenizer files): fine-tune it with ",
            "`text_classification --model_name_or_path ", targs.output_dir, "`");
  return 0;
}

}  // namespace

int pretrain_main(int argc, char** argv) {
  bert_setup::ModelArgs margs;
  TrainingArguments targs = default_training_args();
  double mlm_probability = 0.15;
  cli::Parser p("text_classification pretrain",
                "Pretrains BERT as a masked language model on the fortunes (Hugging Face's run_mlm), with the\n"
                "Trainer; logs the validation loss and perplexity and saves the model with save_pretrained.");
  margs.add_flags(p);
  p.add("mlm_probability", "fraction of the tokens that are masked for prediction", &mlm_probability);
  targs.add_flags(p);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    margs.validate();
    BRISK_CHECK(mlm_probability > 0 && mlm_probability <= 1, "--mlm_probability must be in (0, 1], got ",
                mlm_probability);
    return run(margs, targs, mlm_probability);
  } catch (const Error& e) {
    std::fprintf(stderr, "text_classification pretrain: %s\n", e.message().c_str());
    return 1;
  }
}
