// GPT-2's Hugging Face folders: config.json <-> GPT2Config, and transformers' tensor names and
// Conv1D layout <-> models::GPT2's (docs/pretrained.md has the table).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "brisk/models/gpt2.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "hf_config.h"
#include "hf_weights.h"

namespace brisk::models {

namespace {

const std::vector<std::string> kGpt2Architectures = {"GPT2LMHeadModel", "GPT2Model"};

// transformers' GPT2Config defaults stand in for absent keys (its config.json omits none of these
// in practice). `dropout` replaces the three dropout rates, which brisk cannot hold apart.
GPT2Config read_config(hf::ConfigReader& r, std::optional<double> dropout) {
  hf::check_model_kind(r, "gpt2", kGpt2Architectures);
  GPT2Config c;
  c.vocab_size = r.integer("vocab_size", 50257, 1, hf::kMaxConfigSize);
  c.block_size = r.integer("n_positions", 1024, 1, hf::kMaxConfigSize);
  c.n_embd = r.integer("n_embd", 768, 1, hf::kMaxConfigSize);
  c.n_layer = r.integer("n_layer", 12, 1, 100000);
  c.n_head = r.integer("n_head", 12, 1, c.n_embd);
  if (c.n_embd % c.n_head != 0) r.fail("n_embd", detail::str_cat("must be divisible by n_head (", c.n_head, ")"));
  if (auto inner = r.optional_integer("n_inner", std::nullopt, 1, hf::kMaxConfigSize); inner && *inner != 4 * c.n_embd)
    r.fail("n_inner", detail::str_cat("must be null or 4 * n_embd = ", 4 * c.n_embd, " (brisk's MLP width)"));
  r.choice("activation_function", "gelu_new", {"gelu_new", "gelu_pytorch_tanh"});
  r.keep("activation_function");  // both are GELU's tanh form: written back as it was
  c.layer_norm_epsilon = r.number("layer_norm_epsilon", 1e-5, 0, 1);
  if (c.layer_norm_epsilon <= 0) r.fail("layer_norm_epsilon", "must be positive");
  c.initializer_range = r.number("initializer_range", 0.02, 0, 1000);
  const double resid = r.number("resid_pdrop", 0.1, 0, 1, true), embd = r.number("embd_pdrop", 0.1, 0, 1, true),
               attn = r.number("attn_pdrop", 0.1, 0, 1, true);
  if (!dropout && (resid != embd || resid != attn))
    r.fail("attn_pdrop", detail::str_cat("must equal resid_pdrop (", resid, ") and embd_pdrop (", embd,
                                         "): brisk's GPT-2 has one dropout rate (or pass options.dropout)"));
  c.dropout = dropout.value_or(resid);
  r.require("scale_attn_weights", true, "brisk scales the scores by 1/sqrt(head size)");
  r.require("scale_attn_by_inverse_layer_idx", false, "brisk does not scale by the layer index");
  r.require("add_cross_attention", false, "brisk's GPT-2 has no cross-attention");
  r.require("tie_word_embeddings", true, "brisk's output head is the token embedding");
  r.boolean("reorder_and_upcast_attn", false);  // a numerical choice of transformers' fp16 path: kept as is
  r.keep("reorder_and_upcast_attn");
  r.raw("torch_dtype");  // the saved dtype: brisk loads into its own, and writes its own
  c.other_keys = r.other_keys();
  return c;
}

std::vector<hf::Binding> bindings(const GPT2& m) {
  std::vector<hf::Binding> b = {{.name = "wte.weight", .target = m.wte.weight},
                                {.name = "wpe.weight", .target = m.wpe.weight}};
  auto add = [&](const std::string& name, const Tensor& w, const Tensor& bias, bool conv1d) {
    b.push_back({.name = name + ".weight", .target = w, .transposed = conv1d});
    b.push_back({.name = name + ".bias", .target = bias});
  };
  for (size_t l = 0; l < m.h.size(); ++l) {
    const nn::TransformerBlock& blk = *m.h[l];
    char p[32];
    std::snprintf(p, sizeof p, "h.%zu.", l);
    const std::string s = p;
    add(s + "ln_1", blk.ln_1.weight, blk.ln_1.bias, false);
    add(s + "attn.c_attn", blk.attn.c_attn.weight, blk.attn.c_attn.bias, true);
    add(s + "attn.c_proj", blk.attn.c_proj.weight, blk.attn.c_proj.bias, true);
    add(s + "ln_2", blk.ln_2.weight, blk.ln_2.bias, false);
    add(s + "mlp.c_fc", blk.c_fc.weight, blk.c_fc.bias, true);
    add(s + "mlp.c_proj", blk.c_proj.weight, blk.c_proj.bias, true);
  }
  add("ln_f", m.ln_f.weight, m.ln_f.bias, false);
  return b;
}

// h.<i>.attn.bias (the causal mask) and h.<i>.attn.masked_bias, which older transformers saved.
bool is_attention_buffer(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return false;
  size_t i = 2;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  const std::string rest = name.substr(i);
  return i > 2 && (rest == ".attn.bias" || rest == ".attn.masked_bias");
}

hf::Family family() {
  return {.model_class = "GPT2",
          .prefix = "transformer.",
          .save_with_prefix = true,
          .tied = {{"lm_head.weight", "wte.weight"}},
          .ignorable = [](const std::string& name) {
            return is_attention_buffer(name) ? std::string("a causal-mask buffer; brisk computes the mask")
                                             : std::string();
          }};
}

json::Value config_keys(const GPT2Config& c, DType dtype) {
  json::Value k = json::Value::object();
  if (!c.other_keys.is_object() || !c.other_keys.contains("activation_function"))
    k.set("activation_function", "gelu_new");
  if (!c.other_keys.is_object() || !c.other_keys.contains("reorder_and_upcast_attn"))
    k.set("reorder_and_upcast_attn", false);
  k.set("architectures", json::Value::array({"GPT2LMHeadModel"}));
  k.set("attn_pdrop", c.dropout);
  k.set("embd_pdrop", c.dropout);
  k.set("resid_pdrop", c.dropout);
  k.set("initializer_range", c.initializer_range);
  k.set("layer_norm_epsilon", c.layer_norm_epsilon);
  k.set("model_type", "gpt2");
  k.set("n_embd", c.n_embd);
  k.set("n_head", c.n_head);
  k.set("n_inner", nullptr);
  k.set("n_layer", c.n_layer);
  k.set("n_positions", c.block_size);
  k.set("scale_attn_by_inverse_layer_idx", false);
  k.set("scale_attn_weights", true);
  k.set("torch_dtype", hf::torch_dtype_name(dtype));
  k.set("vocab_size", c.vocab_size);
  return k;
}

}  // namespace

GPT2Config GPT2Config::from_pretrained(const std::string& dir) {
  hf::ConfigReader r(dir, "GPT2Config::from_pretrained");
  return read_config(r, std::nullopt);
}

Pretrained<GPT2> GPT2::from_pretrained(const std::string& dir, const GPT2PretrainedOptions& options) {
  hf::ConfigReader r(dir, "GPT2::from_pretrained");
  if (options.dropout)
    BRISK_CHECK(*options.dropout >= 0 && *options.dropout < 1,
                "GPT2::from_pretrained: options.dropout must be in [0, 1), got ", *options.dropout);
  GPT2Config c = read_config(r, options.dropout);
  c.activation_checkpointing = options.activation_checkpointing;
  auto model = std::make_unique<GPT2>(c);
  LoadReport report = hf::load_weights(dir, bindings(*model), family(), options.allow_unexpected);
  return {std::move(model), std::move(report)};
}

void GPT2::save_pretrained(const std::string& dir, const SaveOptions& options) const {
  const std::vector<hf::Binding> b = bindings(*this);
  hf::save_weights(dir, b, family(), options.max_shard_size);
  io::write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                        hf::config_text(config_keys(config, hf::weights_dtype(b)), config.other_keys),
                        "GPT2::save_pretrained");
}

}  // namespace brisk::models
