// gpt2: trains GPT-2 (models/gpt2.h) on text with the Accelerator, on one process or
// data-parallel on several (`brisk launch -n 2 build/examples/gpt2 ...`), and samples from it.
//
//   gpt2 --preset tiny --max_steps 2000                  # bytes of Debian's fortunes
//   gpt2 --preset 124M --train_bin train.bin --val_bin val.bin   # llm.c's token files
//   gpt2 --preset small --bench 5 --threads 1            # train tokens/s
//   gpt2 sample --checkpoint out/gpt2 --prompt "Q: " --max_new_tokens 200 --temperature 0.8 --top_k 40
//   gpt2 sample --pretrained gpt2 --prompt "Hello"       # a Hugging Face folder with vocab.json + merges.txt
//
// Training: AdamW (betas 0.9, 0.95; weight decay on the matrices and embeddings only), a linear
// warm-up then a cosine decay to --min_lr, gradient clipping, gradient accumulation, mixed
// precision, random windows of the training tokens (each process its shard), the train loss and
// tokens/s every --log_every steps and the validation loss every --eval_every steps into
// <output_dir>/metrics.jsonl, a checkpoint (save_state) at each evaluation, --resume from the
// newest one. docs/gpt2.md describes the flags, the data formats and an example run.
#include <brisk/brisk.h>
#include <brisk/kernels/attention.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

using namespace brisk;

namespace {

struct Args {
  std::string preset = "tiny";
  int64_t n_layer = 0, n_head = 0, n_embd = 0, block_size = 0, vocab_size = 0;  // 0: the preset's
  double dropout = 0.0;
  int64_t batch_size = 8;                         // sequences per micro-step and process
  std::string data;                               // text file or folder; empty: the fortunes
  std::string tokenizer = "byte", tokenizer_dir;  // byte | gpt2 (vocab.json + merges.txt in tokenizer_dir)
  bool activation_checkpointing = false;
  std::string train_bin, val_bin;
  double val_fraction = 0.1;
  int64_t max_steps = 1000;
  double learning_rate = 1e-3, min_lr = -1;  // min_lr < 0: learning_rate / 10
  int64_t warmup_steps = 100;
  double weight_decay = 0.1, grad_clip = 1.0;
  int64_t gradient_accumulation_steps = 1;
  std::optional<std::string> mixed_precision;  // unset: BRISK_MIXED_PRECISION (brisk launch), else "no"
  int threads = 0;
  uint64_t seed = 1337;
  int64_t log_every = 10, eval_every = 200, eval_steps = 20;
  std::string output_dir = "out/gpt2";
  bool resume = false;
  int64_t checkpoint_every = 0;  // also a checkpoint every this many steps (0: at evaluations only)
  bool async_save = true;        // checkpoints written in the background (docs/checkpoints.md)
  int64_t bench = 0;
  bool cuda_graph = false;
  double peak_tflops = 989.0;  // MFU's yardstick on a GPU: an H100 SXM's dense bf16 peak
};

struct SampleArgs {
  std::string checkpoint = "out/gpt2";
  std::string prompt;
  int64_t max_new_tokens = 200, top_k = 40, num_samples = 1;
  double temperature = 0.8;
  uint64_t seed = 0;
  int threads = 0;
  std::string tokenizer_dir;  // overrides the checkpoint's (or the Hugging Face folder's)
  std::string pretrained;     // a Hugging Face GPT-2 folder instead of a checkpoint
};

json::Value config_json(const models::GPT2Config& c, const std::string& tokenizer, const std::string& tokenizer_dir) {
  return json::Value::object({{"n_layer", c.n_layer},
                              {"n_head", c.n_head},
                              {"n_embd", c.n_embd},
                              {"block_size", c.block_size},
                              {"vocab_size", c.vocab_size},
                              {"dropout", c.dropout},
                              {"tokenizer", tokenizer},
                              {"tokenizer_dir", tokenizer_dir}});
}

models::GPT2Config config_from_json(const json::Value& v, const std::string& where) {
  BRISK_CHECK(v.is_object() && v.contains("n_layer"), where, " has no GPT-2 configuration");
  models::GPT2Config c;
  c.n_layer = (*v.find("n_layer")).as_int();
  c.n_head = (*v.find("n_head")).as_int();
  c.n_embd = (*v.find("n_embd")).as_int();
  c.block_size = (*v.find("block_size")).as_int();
  c.vocab_size = (*v.find("vocab_size")).as_int();
  return c;
}

// The tokenizer a text is encoded with, by name (recorded in checkpoints as custom.gpt2.tokenizer
// and .tokenizer_dir): bytes, or GPT-2's BPE from the vocab.json and merges.txt in `dir`.
// "token-ids" (a model trained on token files) has none.
std::unique_ptr<data::Tokenizer> make_tokenizer(const std::string& name, const std::string& dir) {
  if (name == "byte") return std::make_unique<data::ByteTokenizer>();
  if (name == "gpt2") {
    BRISK_CHECK(!dir.empty(), "--tokenizer gpt2 needs --tokenizer_dir DIR, the folder of GPT-2's vocab.json and ",
                "merges.txt (e.g. tests/data/fixtures/gpt2)");
    namespace fs = std::filesystem;
    return std::make_unique<data::GPT2Tokenizer>(data::GPT2Tokenizer::from_files(
        (fs::path(dir) / "vocab.json").string(), (fs::path(dir) / "merges.txt").string()));
  }
  BRISK_THROW("no tokenizer named '", name, "' (valid: byte, gpt2)");
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in.good(), "cannot open '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::move(ss).str();
}

// A checkpoint folder, or the newest complete checkpoint under <dir>/checkpoints.
std::string find_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "state.json")) return dir;
  const fs::path root = fs::path(dir) / "checkpoints";
  std::string best;
  int64_t best_n = -1;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (const auto& e : fs::directory_iterator(root)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("checkpoint_", 0) != 0) continue;
      const std::string num = name.substr(11);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
      const int64_t n = std::stoll(num);
      if (n > best_n && accelerate::is_complete_checkpoint(e.path().string())) best_n = n, best = e.path().string();
    }
  }
  BRISK_CHECK(!best.empty(), "no checkpoint in '", dir, "' (neither a state.json nor a complete ",
              "checkpoints/checkpoint_<n>)");
  return best;
}

std::string join_ids(std::span<const int32_t> ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// A model to sample from and the tokenizer of its prompts and outputs (none for token files).
struct Sampler {
  std::unique_ptr<models::GPT2> model;
  std::unique_ptr<data::Tokenizer> tok;
  std::string source;     // the folder
  std::string tokenizer;  // byte | gpt2 | token-ids (a checkpoint's), gpt2-bpe(<n>) (a Hugging Face folder's)
};

// A checkpoint written by `gpt2` (its configuration in state.json's custom.gpt2).
Sampler load_checkpoint(const SampleArgs& a) {
  Sampler s;
  s.source = find_checkpoint(a.checkpoint);
  const std::string state_path = (std::filesystem::path(s.source) / "state.json").string();
  const json::Value state = json::parse(read_all(state_path));
  const json::Value* custom = state.find("custom");
  BRISK_CHECK(custom && custom->find("gpt2"), state_path,
              " holds no GPT-2 configuration (custom.gpt2): not a checkpoint of this program");
  const json::Value& cj = *custom->find("gpt2");
  s.model = std::make_unique<models::GPT2>(config_from_json(cj, state_path));
  // The checkpoint's model as one state dict (under zero3 rebuilt from every rank's parameter
  // shard: model.safetensors alone holds only the rest).
  s.model->load_state_dict(data::parse_safetensors(accelerate::merged_model_weights(s.source), s.source).tensors);
  s.tokenizer = (*cj.find("tokenizer")).as_string();
  std::string tokenizer_dir = a.tokenizer_dir;  // the flag, else the one the model was trained with
  if (tokenizer_dir.empty() && cj.find("tokenizer_dir")) tokenizer_dir = (*cj.find("tokenizer_dir")).as_string();
  if (s.tokenizer != "token-ids") s.tok = make_tokenizer(s.tokenizer, tokenizer_dir);
  return s;
}

// A Hugging Face GPT-2 folder (docs/pretrained.md) with its tokenizer files (vocab.json +
// merges.txt, or tokenizer.json), or those of --tokenizer_dir.
Sampler load_pretrained(const SampleArgs& a) {
  Sampler s;
  s.source = a.pretrained;
  auto [model, report] = models::GPT2::from_pretrained(a.pretrained);
  s.model = std::move(model);
  const std::string tokenizer_dir = a.tokenizer_dir.empty() ? a.pretrained : a.tokenizer_dir;
  auto tok = std::make_unique<data::GPT2Tokenizer>(data::GPT2Tokenizer::from_pretrained(tokenizer_dir));
  BRISK_CHECK(tok->vocab_size() <= s.model->config.vocab_size, "gpt2 sample: the tokenizer in '", tokenizer_dir,
              "' has ", tok->vocab_size(), " tokens, more than the model's vocab_size ", s.model->config.vocab_size,
              ": they do not belong together");
  s.tokenizer = tok->name();
  s.tok = std::move(tok);
  if (!report.initialized.empty() || !report.ignored.empty()) std::fprintf(stderr, "%s\n", report.str().c_str());
  return s;
}

// --prompt as token ids: the tokenizer's encoding, or the ids themselves for a model of token files.
std::vector<int32_t> prompt_ids(const Sampler& s, const std::string& prompt) {
  std::vector<int32_t> ids;
  if (s.tok) {
    ids = s.tok->encode(prompt.empty() ? std::string("\n") : prompt);
  } else {
    for (const std::string& t : cli::split_comma_list(prompt)) {
      try {
        ids.push_back(static_cast<int32_t>(std::stol(t)));
      } catch (const std::exception&) {
        BRISK_THROW("--prompt must be comma-separated token ids for this model (", s.tokenizer, "), got '", t, "'");
      }
    }
    BRISK_CHECK(!ids.empty(), "--prompt must give at least one token id for this model");
  }
  const int64_t vocab = s.model->config.vocab_size;
  for (int32_t t : ids)
    BRISK_CHECK(t >= 0 && t < vocab, "prompt token ", t, " is outside the vocabulary [0, ", vocab, ")");
  return ids;
}

// Each sample's text on stdout (samples separated by "---").
void print_samples(Sampler& s, const std::vector<int32_t>& prompt, const SampleArgs& a) {
  Tensor idx =
      from_vector(std::vector<int64_t>(prompt.begin(), prompt.end()), {1, static_cast<int64_t>(prompt.size())});
  Generator gen(a.seed);
  for (int64_t k = 0; k < a.num_samples; ++k) {
    Tensor out = contiguous(s.model->generate(idx, a.max_new_tokens, a.temperature, a.top_k, gen).to(DType::I32));
    std::span<const int32_t> ids(out.data<int32_t>(), static_cast<size_t>(out.numel()));
    // Ids past the tokenizer's vocabulary (a padded vocabulary) cannot be decoded: ids then.
    bool text = s.tok != nullptr;
    for (int32_t t : ids) text = text && t < s.tok->vocab_size();
    std::printf("%s\n", text ? s.tok->decode(ids).c_str() : join_ids(ids).c_str());
    if (k + 1 < a.num_samples) std::printf("---\n");
  }
}

int sample_main(int argc, char** argv) {
  SampleArgs a;
  cli::Parser p("gpt2 sample",
                "Generates text from a GPT-2 checkpoint written by `gpt2` (its model.safetensors and the\n"
                "configuration in its state.json), or from a Hugging Face GPT-2 folder with its tokenizer files\n"
                "(--pretrained), with temperature and top-k sampling and a key/value cache.");
  p.add("checkpoint", "a checkpoint folder, or an --output_dir (its newest complete checkpoint)", &a.checkpoint);
  p.add("pretrained", "a Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json + merges.txt)",
        &a.pretrained);
  p.add("prompt",
        "the text to continue (empty: a newline); for models trained on token files, comma-separated token ids",
        &a.prompt);
  p.add("max_new_tokens", "tokens to generate", &a.max_new_tokens);
  p.add("temperature", "divides the logits (0: always the most likely token)", &a.temperature);
  p.add("top_k", "sample among the k most likely tokens (0: all)", &a.top_k);
  p.add("num_samples", "independent samples", &a.num_samples);
  p.add("seed", "seed of the sampling", &a.seed);
  p.add("threads", "CPU threads (0: OMP_NUM_THREADS or all cores)", &a.threads);
  p.add("tokenizer_dir", "GPT-2 BPE files (default: the model's folder, or the folder it was trained with)",
        &a.tokenizer_dir);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    BRISK_CHECK(
        a.pretrained.empty() || !p.given("checkpoint"),
        "gpt2 sample: give --checkpoint (a checkpoint of `gpt2`) or --pretrained (a Hugging Face folder), not both");
    set_num_threads(a.threads);
    Sampler s = a.pretrained.empty() ? load_checkpoint(a) : load_pretrained(a);
    const std::vector<int32_t> prompt = prompt_ids(s, a.prompt);
    std::fprintf(stderr, "gpt2 sample: %s (%lld parameters), %s tokens\n", s.source.c_str(),
                 static_cast<long long>(s.model->num_parameters()), s.tokenizer.c_str());
    print_samples(s, prompt, a);
  } catch (const Error& e) {
    std::fprintf(stderr, "gpt2 sample: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}

// 1. Options: the command line. False when the program stops here (--help, a bad flag or value),
// with its exit status in `status`.
bool parse_options(int argc, char** argv, Args& a, int& status) {
  cli::Parser p(
      "gpt2",
      "Trains GPT-2 with the Accelerator on the bytes of a text (Debian's fortunes by default) or on llm.c's\n"
      "token files; data-parallel under `brisk launch -n N` (--batch_size is per process). `gpt2 sample\n"
      "--help` for generation from a checkpoint.");
  p.add("preset", "model size: tiny, small, 124M or 350M (the shape flags below override it)", &a.preset);
  p.add("n_layer", "transformer blocks (0: the preset's)", &a.n_layer);
  p.add("n_head", "attention heads (0: the preset's)", &a.n_head);
  p.add("n_embd", "width (0: the preset's)", &a.n_embd);
  p.add("block_size", "context length (0: the preset's)", &a.block_size);
  p.add("vocab_size", "vocabulary (0: the preset's; at least 256 for bytes)", &a.vocab_size);
  p.add("dropout", "dropout probability", &a.dropout);
  p.add("activation_checkpointing", "recompute each block in backward instead of keeping its activations",
        &a.activation_checkpointing);
  p.add("batch_size", "sequences per micro-step and process", &a.batch_size);
  p.add("data", "a text file, or a folder of text files (default: /usr/share/games/fortunes)", &a.data);
  p.add("tokenizer", "byte (vocabulary 256) or gpt2 (GPT-2's BPE, vocabulary 50257: give --tokenizer_dir)",
        &a.tokenizer);
  p.add("tokenizer_dir", "folder of GPT-2's vocab.json and merges.txt, for --tokenizer gpt2", &a.tokenizer_dir);
  p.add("train_bin", "llm.c token file to train on (instead of --data)", &a.train_bin);
  p.add("val_bin", "llm.c token file to validate on (default: the last --val_fraction of the training tokens)",
        &a.val_bin);
  p.add("val_fraction", "the share of the tokens kept for validation when no --val_bin is given", &a.val_fraction);
  p.add("max_steps", "optimizer steps", &a.max_steps);
  p.add("learning_rate", "peak AdamW learning rate", &a.learning_rate);
  p.add("warmup_steps", "linear warm-up steps", &a.warmup_steps);
  p.add("min_lr", "learning rate at the end of the cosine decay (negative: learning_rate / 10)", &a.min_lr);
  p.add("weight_decay", "AdamW weight decay (matrices and embeddings only)", &a.weight_decay);
  p.add("grad_clip", "clip the global gradient norm to this (0: no clipping)", &a.grad_clip);
  p.add("gradient_accumulation_steps", "micro-steps per optimizer step", &a.gradient_accumulation_steps);
  p.add("mixed_precision", "no, fp16 or bf16 (default: brisk launch's --mixed_precision, else no)", &a.mixed_precision);
  p.add("threads", "CPU threads per process (0: OMP_NUM_THREADS or all cores)", &a.threads);
  p.add("seed", "seed of the weights and the data order", &a.seed);
  p.add("log_every", "print and log the train loss and tokens/s every this many steps", &a.log_every);
  p.add("eval_every", "validation loss and a checkpoint every this many steps (0: only at the end)", &a.eval_every);
  p.add("eval_steps", "validation batches per process and evaluation", &a.eval_steps);
  p.add("output_dir", "folder for metrics.jsonl and checkpoints/", &a.output_dir);
  p.add("resume", "continue from the newest checkpoint under <output_dir>/checkpoints", &a.resume);
  p.add("checkpoint_every", "also save a checkpoint every this many optimizer steps (0: at evaluations only)",
        &a.checkpoint_every);
  p.add("async_save", "write checkpoints in the background (--no-async-save: save_state waits for the disk)",
        &a.async_save);
  p.add("bench",
        "time this many training steps after 2 warm-up steps (4 with --cuda_graph), print train tokens/s, then exit",
        &a.bench);
  p.add("cuda_graph",
        "capture the training step in a CUDA graph after 3 eager steps and replay it (one GPU and process; needs "
        "--dropout 0, --gradient_accumulation_steps 1 and no fp16)",
        &a.cuda_graph);
  p.add("peak_tflops", "the GPU's peak TFLOP/s for --bench's MFU (H100 SXM dense bf16: 989)", &a.peak_tflops);
  status = 2;
  if (!p.parse(argc, argv)) {
    status = p.exit_code();
    return false;
  }
  if (a.batch_size < 1 || a.max_steps < 1 || a.warmup_steps < 0 || !(a.learning_rate > 0) || a.log_every < 1 ||
      a.eval_every < 0 || a.eval_steps < 1 || a.gradient_accumulation_steps < 1 || a.bench < 0 || a.grad_clip < 0 ||
      a.weight_decay < 0 || a.checkpoint_every < 0) {
    std::fprintf(stderr,
                 "gpt2: --batch_size, --max_steps, --learning_rate, --log_every, --eval_steps and "
                 "--gradient_accumulation_steps must be positive; --warmup_steps, --eval_every, --checkpoint_every, "
                 "--bench, --grad_clip and --weight_decay >= 0\n");
    return false;
  }
  if (!a.train_bin.empty() && p.given("data")) {
    std::fprintf(stderr, "gpt2: give either --data or --train_bin, not both\n");
    return false;
  }
  // Recorded in checkpoints for `gpt2 sample`, which may run from another folder.
  if (!a.tokenizer_dir.empty()) a.tokenizer_dir = std::filesystem::absolute(a.tokenizer_dir).string();
  if (!a.val_bin.empty() && a.train_bin.empty()) {
    std::fprintf(stderr, "gpt2: --val_bin needs --train_bin\n");
    return false;
  }
  return true;
}

// The model's shape: the preset, with the shape flags over it.
models::GPT2Config model_config(const Args& a) {
  models::GPT2Config cfg = models::GPT2Config::preset(a.preset);
  if (a.n_layer > 0) cfg.n_layer = a.n_layer;
  if (a.n_head > 0) cfg.n_head = a.n_head;
  if (a.n_embd > 0) cfg.n_embd = a.n_embd;
  if (a.block_size > 0) cfg.block_size = a.block_size;
  if (a.vocab_size > 0) cfg.vocab_size = a.vocab_size;
  cfg.dropout = a.dropout;
  cfg.activation_checkpointing = a.activation_checkpointing;
  cfg.validate();
  return cfg;
}

// The Accelerator's options (--mixed_precision is user input: parsed once here, a bad value names
// the valid ones), a checkpoint at each evaluation under <output_dir>/checkpoints (the last two kept).
AcceleratorOptions accelerator_options(const Args& a) {
  std::optional<MixedPrecision> mp;
  if (a.mixed_precision) mp = parse_enum<MixedPrecision>(*a.mixed_precision, "--mixed_precision");
  return {.mixed_precision = mp,
          .gradient_accumulation_steps = a.gradient_accumulation_steps,
          .seed = a.seed,
          .project_dir = a.output_dir,
          .automatic_checkpoint_naming = true,
          .total_limit = 2,
          .async_save = a.async_save};
}

// --cuda_graph: what a replay cannot redo: work on other processes (the all-reduce), host
// decisions per micro-step, fresh random numbers, the fp16 scaler's read of its inf/NaN flag.
void check_cuda_graph(const Accelerator& acc, const Args& a) {
  if (!a.cuda_graph) return;
  const int64_t N = acc.num_processes();
  BRISK_CHECK(acc.device().is_cuda(), "--cuda_graph needs a GPU (this process trains on ", acc.device().str(), ")");
  BRISK_CHECK(N == 1, "--cuda_graph runs on one process (the gradient all-reduce is not captured); got ", N);
  BRISK_CHECK(a.gradient_accumulation_steps == 1, "--cuda_graph needs --gradient_accumulation_steps 1");
  BRISK_CHECK(a.dropout == 0, "--cuda_graph needs --dropout 0 (a replay repeats the captured random numbers)");
  BRISK_CHECK(acc.mixed_precision() != MixedPrecision::FP16,
              "--cuda_graph cannot train in fp16 (the loss scaler reads the GPU every step): use bf16");
}

// The training and validation tokens: a text encoded with --tokenizer (which may widen the
// vocabulary), or llm.c's token files.
struct Tokens {
  std::string tokenizer, source;  // the tokenizer's name ("token-ids" for token files); where from
  data::TokenSplit split;
};

Tokens read_tokens(const Args& a, models::GPT2Config& cfg) {
  Tokens t{a.tokenizer, "", {}};
  if (a.train_bin.empty()) {
    const std::string text = data::read_text_corpus(a.data);
    const std::unique_ptr<data::Tokenizer> tok = make_tokenizer(t.tokenizer, a.tokenizer_dir);
    // A larger vocabulary than the preset's, unless --vocab_size says otherwise: the tokenizer's,
    // padded to a multiple of 64 as GPT-2's 50257 becomes 50304.
    if (a.vocab_size == 0 && tok->vocab_size() > cfg.vocab_size) cfg.vocab_size = (tok->vocab_size() + 63) / 64 * 64;
    t.split = data::split_tokens(tok->encode(text), a.val_fraction);
    t.source = a.data.empty() ? std::string(data::kFortunesDir) : a.data;
    return t;
  }
  t.tokenizer = "token-ids";
  if (a.val_bin.empty()) {
    t.split = data::split_tokens(data::read_token_file(a.train_bin), a.val_fraction);
  } else {
    t.split.train = data::read_token_file(a.train_bin);
    t.split.val = data::read_token_file(a.val_bin);
  }
  t.source = a.train_bin;
  return t;
}

// 2. Data: windows of block_size + 1 tokens, every window start for training (shuffled; each step
// takes batch_size windows on every process, incomplete rounds are dropped), block_size apart for
// validation.
struct Data {
  std::string tokenizer, source;
  int64_t train_tokens = 0, val_tokens = 0;
  data::DataLoader train, val;
};

Data load_data(const Args& a, models::GPT2Config& cfg, int64_t N) {
  Tokens t = read_tokens(a, cfg);
  const int64_t T = cfg.block_size;
  int32_t max_token = 0;
  for (const auto* part : {&t.split.train, &t.split.val}) {
    for (int32_t id : *part) max_token = std::max(max_token, id);
  }
  BRISK_CHECK(max_token < cfg.vocab_size, "the data holds token ", max_token, " but vocab_size is ", cfg.vocab_size,
              " (give --vocab_size or a larger --preset)");
  BRISK_CHECK(static_cast<int64_t>(t.split.val.size()) > T, t.split.val.size(),
              " validation tokens are too few for one window of block_size ", T, " + 1");
  const auto train_tokens = static_cast<int64_t>(t.split.train.size()),
             val_tokens = static_cast<int64_t>(t.split.val.size());
  auto train_set = std::make_shared<data::TokenWindows>(std::move(t.split.train), T, 1);
  auto val_set = std::make_shared<data::TokenWindows>(std::move(t.split.val), T, T);
  BRISK_CHECK(train_set->size() >= a.batch_size * N, train_set->size(), " training windows (", train_tokens,
              " tokens, block_size ", T, ") are fewer than one step needs (batch_size ", a.batch_size, " x ", N,
              " process(es))");
  return Data{
      t.tokenizer,
      t.source,
      train_tokens,
      val_tokens,
      data::DataLoader(train_set, {.batch_size = a.batch_size, .shuffle = true, .drop_last = true, .seed = a.seed}),
      data::DataLoader(val_set, {.batch_size = a.batch_size})};
}

// 3. Model: GPT-2, AdamW (betas 0.9, 0.95; weight decay on the matrices and embeddings only, as
// param_groups splits them) and the schedule: a linear warm-up from learning_rate / warmup at step
// 0 (not 0, which would waste the step) to learning_rate at step warmup, then a cosine decay to
// min_lr; a warm-up as long as the run is cut to leave one step of decay.
struct Model {
  Model(const Args& a, const models::GPT2Config& cfg)
      : net(cfg),
        opt(net.param_groups({.lr = a.learning_rate,
                              .beta1 = 0.9,
                              .beta2 = 0.95,
                              .weight_decay = a.weight_decay,
                              .capturable = a.cuda_graph})),
        sched(opt, schedule(a)) {}
  static optim::WarmupOptions schedule(const Args& a) {
    const double min_lr = a.min_lr >= 0 ? a.min_lr : a.learning_rate / 10;
    const int64_t warmup = std::min(a.warmup_steps, a.max_steps - 1);
    return {.warmup_steps = warmup,
            .total_steps = a.max_steps,
            .decay = optim::WarmupDecay::Cosine,
            .start_factor = warmup > 0 ? 1.0 / static_cast<double>(warmup) : 1.0,
            .min_factor = min_lr / a.learning_rate};
  }
  models::GPT2 net;
  optim::AdamW opt;
  optim::WarmupLR sched;
};

// A training micro-step (returns its loss): eager, or with --cuda_graph after 3 eager micro-steps
// (libraries make their handles and workspaces, the optimizer moves its step count and learning
// rates to the GPU) one step captured reading the batch from static tensors; each later step copies
// its batch there and replays. The scheduler steps outside the graph: set_lr writes the learning
// rate the replay reads.
class TrainStep {
 public:
  TrainStep(Accelerator& acc, Model& m, const Args& a) : acc_(acc), m_(m), a_(a) {}

  double operator()(const Tensor& x, const Tensor& y) { return a_.cuda_graph ? graphed(x, y) : eager(x, y); }
  double lr() const { return step_lr_; }  // the learning rate of the last optimizer step
  // Replays allocate nothing (their memory is the graph's private pool, filled during the
  // capture), so --bench's peak over the timed steps would leave the step's memory out: the peak
  // up to the end of the capture stands for it.
  int64_t capture_peak() const { return capture_peak_; }

 private:
  double eager(const Tensor& x, const Tensor& y) {
    auto sync = acc_.accumulate(m_.net);
    Tensor loss;
    {
      auto ac = acc_.autocast();
      loss = models::GPT2::loss(m_.net(x), y);
    }
    acc_.backward(loss);
    if (acc_.sync_gradients() && a_.grad_clip > 0) acc_.clip_grad_norm_(m_.net, a_.grad_clip);
    step_lr_ = m_.opt.lr();
    m_.opt.step();    // prepared: does nothing on accumulation micro-steps that do not sync
    m_.sched.step();  // and so the schedule advances once per real step
    m_.opt.zero_grad();
    return loss.item<double>();
  }

  double graphed(const Tensor& x, const Tensor& y) {
    if (!graph_.captured()) {
      if (eager_left_-- > 0) return eager(x, y);
      static_x_ = x.clone();
      static_y_ = y.clone();
      graph_.capture([&] {
        auto sync = acc_.accumulate(m_.net);
        {
          auto ac = acc_.autocast();
          static_loss_ = models::GPT2::loss(m_.net(static_x_), static_y_);
        }
        acc_.backward(static_loss_);
        if (a_.grad_clip > 0) acc_.clip_grad_norm_tensor_(m_.net, a_.grad_clip);
        m_.opt.step();
        m_.opt.zero_grad();
      });
      capture_peak_ = memory_stats(DeviceKind::CUDA).total_peak;
    }
    static_x_.copy_(x);
    static_y_.copy_(y);
    step_lr_ = m_.opt.lr();
    graph_.replay();
    m_.sched.step();
    return static_loss_.item<double>();
  }

  Accelerator& acc_;
  Model& m_;
  const Args& a_;
  double step_lr_ = 0;
  cuda::Graph graph_;
  Tensor static_x_, static_y_, static_loss_;
  int64_t eager_left_ = 3;
  int64_t capture_peak_ = 0;
};

// Which attention ran (a figure means little without it): the backend in force, cuDNN's plan
// counters, and why the last call fell back to brisk's kernels, if it did.
void print_attention_path(Accelerator& acc) {
  const kernels::AttentionPlanStats st = kernels::attention_plan_stats();
  const std::string why = kernels::attention_fallback_reason();
  acc.print("attention: ", kernels::attention_backend_name(kernels::attention_backend()), ", cuDNN plans built ",
            st.built, ", reused ", st.reused, why.empty() ? std::string() : ", last call fell back: " + why);
}

// --bench's report: tokens/s over the timed steps (`s` seconds), on a GPU the model FLOPs
// utilisation, and the main process's peak bytes by category.
void print_bench(Accelerator& acc, const Model& m, const TrainStep& step, const Args& a, double s) {
  const models::GPT2Config& cfg = m.net.config;
  const int64_t N = acc.num_processes(), T = cfg.block_size;
  acc.print("gpt2: ", m.net.num_parameters(), " parameters, ", N, " process(es) x batch ", a.batch_size, " x ", T,
            " tokens, mixed precision ", enum_name(acc.mixed_precision()), ", ", get_num_threads(),
            " thread(s) per process");
  const double tokens_s = static_cast<double>(a.bench * a.batch_size * T * N) / s;
  acc.print("train tokens/s: ", static_cast<int64_t>(tokens_s));
  if (acc.device().is_cuda()) {
    // Model FLOPs utilisation as nanoGPT and llm.c count it: 6 N + 12 L C T per token, N the
    // parameters in matrix products (all but the position embedding), against the GPU's peak.
    const double n_matmul = static_cast<double>(m.net.num_parameters() - m.net.wpe.weight.numel());
    const double flops_per_token = 6.0 * n_matmul + 12.0 * static_cast<double>(cfg.n_layer * cfg.n_embd * T);
    acc.print("MFU: ", 100.0 * tokens_s / static_cast<double>(N) * flops_per_token / (a.peak_tflops * 1e12), " % of ",
              a.peak_tflops, " TFLOP/s per GPU, step ", 1e3 * s / static_cast<double>(a.bench), " ms");
    print_attention_path(acc);
  }
  // Peak bytes of the main process by category over the timed steps (activations are counted as
  // "other" here).
  const MemoryStats ms = memory_stats(acc.device().is_cuda() ? DeviceKind::CUDA : DeviceKind::CPU);
  const auto peak = [&](MemoryCategory c) { return ms.peak[static_cast<int>(c)]; };
  acc.print("peak bytes (main process): parameters ", peak(MemoryCategory::Parameters), ", gradients ",
            peak(MemoryCategory::Gradients), ", optimizer state ", peak(MemoryCategory::OptimizerState),
            ", activations and other ", peak(MemoryCategory::Activations) + peak(MemoryCategory::Other), ", total ",
            ms.total_peak);
  if (a.cuda_graph)
    acc.print(
        "peak bytes up to the end of the capture (the replays run in the graph's private pool, which the "
        "line above does not count): total ",
        step.capture_peak());
}

// --bench: times a.bench training steps after 2 warm-up micro-steps (--cuda_graph: 3 eager, then
// the capture).
void bench(Accelerator& acc, const Model& m, TrainStep& step, data::DataLoader& train, const Args& a) {
  int64_t done = a.cuda_graph ? -4 : -2;
  std::chrono::steady_clock::time_point t0;
  while (done < a.bench) {
    for (auto& [x, y] : train) {
      if (done == 0) {
        acc.wait_for_everyone();
        // The peak bytes printed are the timed steps' (not prepare's, which holds the full model
        // and its shards at once under sharding).
        reset_peak_memory_stats(acc.device().is_cuda() ? DeviceKind::CUDA : DeviceKind::CPU);
        t0 = std::chrono::steady_clock::now();
      }
      step(x, y);
      if (++done == a.bench) break;
    }
  }
  acc.wait_for_everyone();
  print_bench(acc, m, step, a, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Validation loss over the first eval_steps batches of every process (the same windows whatever the
// number of processes when batch_size * N is the same), each window once.
double evaluate(Accelerator& acc, Model& m, data::DataLoader& val, const Args& a) {
  const int64_t T = m.net.config.block_size, V = m.net.config.vocab_size;
  NoGradGuard no_grad;
  m.net.eval();
  double sum_loss = 0;
  int64_t windows = 0, batches = 0;
  // From the first batch every time: an evaluation stops after eval_steps batches, and the
  // checkpoint records that position, which load_state would otherwise resume from.
  val.set_start_batch(0);
  for (auto& [x, y] : val) {
    Tensor logits;
    {
      auto ac = acc.autocast();
      logits = m.net(x);
    }
    const int64_t B = x.size(0);
    Tensor per_token =
        cross_entropy(reshape(logits, {B * T, V}).to(DType::F32), reshape(y, {B * T}), {.reduction = Reduction::None});
    Tensor per_window = acc.gather_for_metrics(reshape(per_token, {B, T}).mean(1));
    sum_loss += sum(per_window.to(DType::F64)).item<double>();
    windows += per_window.numel();
    if (++batches == a.eval_steps) break;
  }
  m.net.train();
  return sum_loss / static_cast<double>(windows);
}

void print_header(Accelerator& acc, const Model& m, const Data& d, const Args& a) {
  const models::GPT2Config& cfg = m.net.config;
  char header[512];
  std::snprintf(header, sizeof header,
                "gpt2: %lld parameters (%lld layers, %lld heads, width %lld, context %lld, vocabulary %lld); %s: %lld "
                "train / %lld validation tokens (%s); %lld process(es) x batch %lld x %lld tokens x %lld "
                "accumulation, mixed precision %s, %d thread(s) per process",
                static_cast<long long>(m.net.num_parameters()), static_cast<long long>(cfg.n_layer),
                static_cast<long long>(cfg.n_head), static_cast<long long>(cfg.n_embd),
                static_cast<long long>(cfg.block_size), static_cast<long long>(cfg.vocab_size), d.source.c_str(),
                static_cast<long long>(d.train_tokens), static_cast<long long>(d.val_tokens), d.tokenizer.c_str(),
                static_cast<long long>(acc.num_processes()), static_cast<long long>(a.batch_size),
                static_cast<long long>(cfg.block_size), static_cast<long long>(a.gradient_accumulation_steps),
                std::string(enum_name(acc.mixed_precision())).c_str(), get_num_threads());
  acc.print(header);
}

// 5. The loop: optimizer steps up to max_steps (--resume: from the newest checkpoint's), the train
// loss and tokens/s every log_every steps, the validation loss and a checkpoint every eval_every
// steps and at the end; one progress bar per stretch between evaluations.
class TrainLoop {
 public:
  TrainLoop(Accelerator& acc, Model& m, TrainStep& step, Data& d, const Args& a)
      : acc_(acc), m_(m), train_step_(step), d_(d), a_(a) {}

  void run() {
    resume();
    print_header(acc_, m_, d_, a_);
    new_bar();
    t_log_ = std::chrono::steady_clock::now();
    const int64_t N = acc_.num_processes();
    while (step_ < a_.max_steps) {
      for (auto& [x, y] : d_.train) {
        loss_sum_ += train_step_(x, y);
        ++micro_;
        tokens_ += x.numel() * N;
        if (!acc_.sync_gradients()) continue;
        ++step_;
        const bool last = step_ == a_.max_steps;
        if (step_ % a_.log_every == 0 || last) log();
        bar_->update(1, post_);
        if ((a_.eval_every > 0 && step_ % a_.eval_every == 0) || last)
          evaluate_and_save(last);
        else if (a_.checkpoint_every > 0 && step_ % a_.checkpoint_every == 0)
          acc_.save_state();  // --checkpoint_every: between evaluations too
        if (last) break;
        acc_.stop_if_preempted();  // SIGTERM/SIGUSR1: save, exit 75; started again it continues here
      }
    }
    acc_.wait_for_save();  // the last checkpoint on disk, or its error here
  }

 private:
  // The step counter and the model's shape go into every checkpoint; --resume loads the newest
  // (its model must be the one configured).
  void resume() {
    const models::GPT2Config& cfg = m_.net.config;
    acc_.register_for_checkpointing(
        "step", [this] { return json::Value(step_); }, [this](const json::Value& v) { step_ = v.as_int(); });
    // The log window in progress (a preemption or --checkpoint_every saves between logs): the next
    // logged loss is the uninterrupted run's.
    acc_.register_for_checkpointing(
        "log_window",
        [this] {
          json::Value v = json::Value::object();
          v.set("loss_sum", loss_sum_);
          v.set("micro_steps", micro_);
          return v;
        },
        [this](const json::Value& v) {
          loss_sum_ = v.at("loss_sum").as_double();
          micro_ = v.at("micro_steps").as_int();
        });
    acc_.register_for_checkpointing(
        "gpt2", [this, &cfg] { return config_json(cfg, d_.tokenizer, a_.tokenizer_dir); },
        [this, &cfg](const json::Value& v) {
          const models::GPT2Config saved = config_from_json(v, "the checkpoint");
          BRISK_CHECK(saved.n_layer == cfg.n_layer && saved.n_head == cfg.n_head && saved.n_embd == cfg.n_embd &&
                          saved.block_size == cfg.block_size && saved.vocab_size == cfg.vocab_size,
                      "--resume: the checkpoint's model (", v.dump(), ") is not the one configured (",
                      config_json(cfg, d_.tokenizer, a_.tokenizer_dir).dump(), ")");
        });
    // --resume, or a restart by `brisk launch --max-restarts` (docs/fault-tolerance.md).
    if (const std::string from = acc_.resume_on_restart(a_.resume); !from.empty())
      acc_.print("gpt2: resumed from ", from, " after step ", step_);
  }

  void new_bar() {
    const int64_t left = a_.max_steps - step_;
    const int64_t span = a_.eval_every > 0 ? std::min(left, a_.eval_every - step_ % a_.eval_every) : left;
    bar_.emplace(span, "steps " + std::to_string(step_ + 1) + "-" + std::to_string(step_ + span), "step",
                 acc_.is_main_process());
  }

  // The train loss (the mean over the micro-steps since the last log and over the processes), the
  // learning rate and tokens/s: logged, and shown on the progress bar.
  void log() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_log_).count();
    const double tps = static_cast<double>(tokens_) / secs;
    const double loss =
        acc_.reduce(full({1}, loss_sum_ / static_cast<double>(micro_), {.dtype = DType::F64}), dist::ReduceOp::Mean)
            .item<double>();
    acc_.log({{"loss", loss}, {"lr", train_step_.lr()}, {"tokens_per_s", tps}}, step_);
    char buf[96];
    std::snprintf(buf, sizeof buf, "loss %.4f, lr %.2e, %.0f tok/s", loss, train_step_.lr(), tps);
    post_ = buf;
    loss_sum_ = 0, micro_ = 0, tokens_ = 0, t_log_ = std::chrono::steady_clock::now();
  }

  void evaluate_and_save(bool last) {
    bar_->close();
    const auto t_eval = std::chrono::steady_clock::now();
    const double val_loss = evaluate(acc_, m_, d_.val, a_);
    acc_.log({{"val_loss", val_loss}}, step_);
    char line[128];
    std::snprintf(line, sizeof line, "step %lld/%lld: %s, val loss %.4f", static_cast<long long>(step_),
                  static_cast<long long>(a_.max_steps), post_.c_str(), val_loss);
    acc_.print(line);
    acc_.save_state();
    t_log_ += std::chrono::steady_clock::now() - t_eval;  // evaluation and saving are not training time
    if (!last) new_bar();
  }

  Accelerator& acc_;
  Model& m_;
  TrainStep& train_step_;
  Data& d_;
  const Args& a_;
  int64_t step_ = 0;  // optimizer steps done
  std::optional<ProgressBar> bar_;
  double loss_sum_ = 0;  // over the micro-steps since the last log
  int64_t micro_ = 0, tokens_ = 0;
  std::string post_;
  std::chrono::steady_clock::time_point t_log_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "sample") return sample_main(argc - 1, argv + 1);
  Args a;
  if (int status = 0; !parse_options(argc, argv, a, status)) return status;
  try {
    set_num_threads(a.threads);
    models::GPT2Config cfg = model_config(a);
    Accelerator acc(accelerator_options(a));
    check_cuda_graph(acc, a);
    Data data = load_data(a, cfg, acc.num_processes());  // may widen cfg's vocabulary to the tokenizer's
    Model model(a, cfg);
    acc.prepare(model.net, model.opt, data.train, data.val, model.sched);  // 4. Prepare
    TrainStep step(acc, model, a);
    if (a.bench > 0) {
      bench(acc, model, step, data.train, a);
      return 0;
    }
    TrainLoop loop(acc, model, step, data, a);  // 5. The loop
    loop.run();
    // 6. Save: the checkpoints the loop wrote hold the model.
    acc.print("saved ", a.output_dir, "/checkpoints and ", a.output_dir, "/metrics.jsonl; `gpt2 sample --checkpoint ",
              a.output_dir, "` generates text");
  } catch (const Error& e) {
    std::fprintf(stderr, "gpt2: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
