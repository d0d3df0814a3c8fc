// GPT-2 learns: the tiny preset, trained a couple of hundred steps on the bytes of a text (Debian's
// fortunes when installed, else a text generated here), reaches a validation loss below the
// entropy of the training text's byte frequencies. A model that learned those frequencies and
// nothing else scores about that entropy, so only a model that uses the context passes.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

using namespace brisk;

namespace {

// Sentences of words drawn from a small vocabulary with a skewed distribution: text whose
// letters depend on the letters before them (words), as a fallback when fortunes is absent.
std::string generated_text(size_t bytes) {
  const std::vector<std::string> words{"the",  "a",     "of",    "brisk", "model", "trains", "on",    "text",
                                       "and",  "loss",  "falls", "below", "every", "byte",   "token", "window",
                                       "with", "small", "large", "quick", "fox",   "jumps",  "over",  "lazy"};
  std::string s;
  uint64_t x = 12345;
  while (s.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0;
    s += words[static_cast<size_t>(u * u * static_cast<double>(words.size()))];
    s += (x >> 7) % 9 == 0 ? ".\n" : " ";
  }
  return s;
}

}  // namespace

TEST(GPT2Training, TinyBeatsTheByteUnigramEntropy) {
  const bool fortunes = std::filesystem::exists(data::kFortunesDir);
  const std::string text = fortunes ? data::read_text_corpus("") : generated_text(400000);
  data::ByteTokenizer tok;
  auto [train_tokens, val_tokens] = data::split_tokens(tok.encode(text), 0.1);
  const double entropy = data::unigram_entropy(train_tokens, 256);

  // One thread: on a loaded machine OpenMP threads waiting for each other made this 20x slower.
  struct Threads {
    int saved = get_num_threads();
    Threads() { set_num_threads(1); }
    ~Threads() { set_num_threads(saved); }
  } one_thread;
  manual_seed(0);
  models::GPT2 model(models::GPT2Config::preset("tiny"));
  const int64_t T = model.config.block_size, steps = 200;
  optim::AdamW opt(model.param_groups({.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1}));
  optim::WarmupLR sched(opt, {.warmup_steps = 20, .total_steps = steps, .start_factor = 0.05, .min_factor = 0.1});
  data::DataLoader train(std::make_shared<data::TokenWindows>(std::move(train_tokens), T, 1),
                         {.batch_size = 8, .shuffle = true, .drop_last = true, .seed = 1});
  int64_t step = 0;
  double first = 0, last = 0;
  while (step < steps) {
    for (auto& [x, y] : train) {
      Tensor loss = models::GPT2::loss(model(x), y);
      loss.backward();
      optim::clip_grad_norm_(model.parameters(), 1.0);
      opt.step();
      sched.step();
      opt.zero_grad();
      (step == 0 ? first : last) = loss.item<double>();
      if (++step == steps) break;
    }
  }
  // Validation: 32 sequential windows of the held-out tail.
  NoGradGuard no_grad;
  model.eval();
  data::TokenWindows val(std::move(val_tokens), T, T);
  std::vector<int64_t> idx(std::min<int64_t>(32, val.size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  data::Batch b = val.get_batch(idx);
  const double val_loss = models::GPT2::loss(model(b.data), b.target).item<double>();
  std::printf("%s: train loss %.4f -> %.4f, validation loss %.4f, byte unigram entropy %.4f\n",
              fortunes ? "fortunes" : "generated text", first, last, val_loss, entropy);
  EXPECT_NEAR(first, std::log(256.0), 0.2);
  EXPECT_LT(val_loss, entropy) << (fortunes ? "fortunes" : "generated text") << ": train loss " << first << " -> "
                               << last << ", validation loss " << val_loss << ", byte unigram entropy " << entropy;
}
