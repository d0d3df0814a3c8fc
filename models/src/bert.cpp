// BERT: the config's presets and checks, the embeddings, the encoder layer, the model and its two
// heads, with transformers' initialisation and forward computation.
#include "brisk/models/bert.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"
#include "brisk/nn/init.h"

namespace brisk::models {

namespace {

Tensor activation(const Tensor& x, BertActivation act) {
  switch (act) {
    case BertActivation::Gelu:
      return gelu(x, GeluApproximation::None);
    case BertActivation::GeluNew:
    case BertActivation::GeluPytorchTanh:
      return gelu(x, GeluApproximation::Tanh);
    case BertActivation::Relu:
      return relu(x);
  }
  BRISK_THROW("BERT: unknown activation");
}

// transformers' BertPreTrainedModel._init_weights over every submodule of `m`.
void init_weights(nn::Module& m, double std) {
  NoGradGuard no_grad;
  for (auto& [name, mod] : m.named_modules()) {
    if (auto* l = dynamic_cast<nn::Linear*>(mod)) {
      nn::init::normal_(l->weight, 0.0, std);
      if (l->bias.defined()) nn::init::zeros_(l->bias);
    } else if (auto* e = dynamic_cast<nn::Embedding*>(mod)) {
      nn::init::normal_(e->weight, 0.0, std);
      if (e->padding_idx >= 0) nn::init::zeros_(e->weight.select(0, e->padding_idx));
    }  // LayerNorms start at weight 1, bias 0 already
  }
}

void check_tokens(const Tensor& ids, const Tensor& other, const char* what, const char* who) {
  if (!other.defined()) return;
  BRISK_CHECK(other.sizes() == ids.sizes(), who, ": ", what, " must have the shape of input_ids ", ids.sizes(),
              ", got ", other.sizes());
  BRISK_CHECK(other.device() == ids.device(), who, ": ", what, " is on ", other.device(), " but input_ids on ",
              ids.device());
}

}  // namespace

// --- config -----------------------------------------------------------------------

void BertConfig::set_num_labels(int64_t n) {
  BRISK_CHECK(n >= 1, "BertConfig: num_labels must be >= 1, got ", n);
  labels.clear();
  for (int64_t i = 0; i < n; ++i) labels.push_back("LABEL_" + std::to_string(i));
}

void BertConfig::validate() const {
  auto positive = [](int64_t v, const char* name) {
    BRISK_CHECK(v >= 1, "BertConfig: ", name, " must be >= 1, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(intermediate_size, "intermediate_size");
  positive(max_position_embeddings, "max_position_embeddings");
  positive(type_vocab_size, "type_vocab_size");
  BRISK_CHECK(hidden_size % num_attention_heads == 0, "BertConfig: hidden_size (", hidden_size,
              ") must be divisible by num_attention_heads (", num_attention_heads, ")");
  auto rate = [](double p, const char* name) {
    BRISK_CHECK(p >= 0.0 && p < 1.0, "BertConfig: ", name, " must be in [0, 1), got ", p);
  };
  rate(hidden_dropout_prob, "hidden_dropout_prob");
  rate(attention_probs_dropout_prob, "attention_probs_dropout_prob");
  if (classifier_dropout) rate(*classifier_dropout, "classifier_dropout");
  BRISK_CHECK(initializer_range >= 0 && std::isfinite(initializer_range),
              "BertConfig: initializer_range must be >= 0, got ", initializer_range);
  BRISK_CHECK(layer_norm_eps > 0 && std::isfinite(layer_norm_eps), "BertConfig: layer_norm_eps must be positive, got ",
              layer_norm_eps);
  BRISK_CHECK(!pad_token_id || (*pad_token_id >= 0 && *pad_token_id < vocab_size), "BertConfig: pad_token_id ",
              pad_token_id.value_or(0), " must be in [0, vocab_size = ", vocab_size, ")");
  BRISK_CHECK(!labels.empty(), "BertConfig: labels (id2label) must not be empty");
}

std::vector<std::string> BertConfig::preset_names() {
  return {"tiny", "mini", "base"};
}

BertConfig BertConfig::preset(const std::string& name) {
  BertConfig c;
  if (name == "tiny") {
    c.vocab_size = 99, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 4;
    c.intermediate_size = 37, c.max_position_embeddings = 64;
  } else if (name == "mini") {
    c.hidden_size = 256, c.num_hidden_layers = 4, c.num_attention_heads = 4, c.intermediate_size = 1024;
  } else if (name != "base") {
    std::string valid;
    for (const std::string& n : preset_names()) valid += (valid.empty() ? "" : ", ") + n;
    BRISK_THROW("BertConfig: unknown preset '", name, "' (valid: ", valid, ")");
  }
  return c;
}

// --- modules ----------------------------------------------------------------------

BertEmbeddings::BertEmbeddings(const BertConfig& c)
    : word_embeddings(c.vocab_size, c.hidden_size, {.padding_idx = c.pad_token_id.value_or(-1)}),
      position_embeddings(c.max_position_embeddings, c.hidden_size),
      token_type_embeddings(c.type_vocab_size, c.hidden_size),
      layer_norm(Shape{c.hidden_size}, {.eps = c.layer_norm_eps}),
      dropout(c.hidden_dropout_prob) {
  register_modules({{"word_embeddings", word_embeddings},
                    {"position_embeddings", position_embeddings},
                    {"token_type_embeddings", token_type_embeddings},
                    {"LayerNorm", layer_norm},
                    {"dropout", dropout}});
}

Tensor BertEmbeddings::forward(const Tensor& input_ids, const Tensor& token_type_ids) {
  const int64_t T = input_ids.size(1);
  Tensor types = token_type_ids.defined()
                     ? token_type_ids
                     : zeros(input_ids.sizes(), {.dtype = DType::I64, .device = input_ids.device()});
  // transformers' order: words + token types, then + positions.
  Tensor x = word_embeddings(input_ids) + token_type_embeddings(types);
  x = x + position_embeddings(arange(T, {.dtype = DType::I64, .device = input_ids.device()}));
  return dropout(layer_norm(x));
}

BertLayer::BertLayer(const BertConfig& c)
    : query(c.hidden_size, c.hidden_size),
      key(c.hidden_size, c.hidden_size),
      value(c.hidden_size, c.hidden_size),
      attention_dense(c.hidden_size, c.hidden_size),
      intermediate_dense(c.hidden_size, c.intermediate_size),
      output_dense(c.intermediate_size, c.hidden_size),
      attention_norm(Shape{c.hidden_size}, {.eps = c.layer_norm_eps}),
      output_norm(Shape{c.hidden_size}, {.eps = c.layer_norm_eps}),
      attention_dropout_(c.attention_probs_dropout_prob),
      attention_output_dropout_(c.hidden_dropout_prob),
      output_dropout_(c.hidden_dropout_prob),
      num_heads_(c.num_attention_heads),
      act_(c.hidden_act) {
  self_.register_modules({{"query", query}, {"key", key}, {"value", value}, {"dropout", attention_dropout_}});
  attention_output_.register_modules(
      {{"dense", attention_dense}, {"LayerNorm", attention_norm}, {"dropout", attention_output_dropout_}});
  attention_.register_modules({{"self", self_}, {"output", attention_output_}});
  intermediate_.register_modules({{"dense", intermediate_dense}});
  output_.register_modules({{"dense", output_dense}, {"LayerNorm", output_norm}, {"dropout", output_dropout_}});
  register_modules({{"attention", attention_}, {"intermediate", intermediate_}, {"output", output_}});
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), hd = H / num_heads_;
  auto heads = [&](const Tensor& t) { return t.view({B, T, num_heads_, hd}).transpose(1, 2); };  // (B, h, T, hd)
  Tensor q = heads(query(x)), k = heads(key(x)), v = heads(value(x));
  Tensor scores = matmul(q, k.transpose(-2, -1)).div(std::sqrt(static_cast<double>(hd)));  // (B, h, T, T)
  // The mask is added in f32 (its -3.4e38 would be -inf in 16 bits, and a query whose keys were
  // all padding would get NaNs): a fully padded row attends uniformly, as in transformers.
  if (mask.defined()) scores = scores.to(DType::F32) + mask;
  Tensor probs = attention_dropout_(softmax(scores, -1));
  Tensor context = matmul(probs.to(v.dtype()), v).transpose(1, 2).reshape({B, T, H});
  Tensor h = attention_norm.forward_residual(attention_output_dropout_(attention_dense(context)), x).y;
  // A tanh GELU between the two products makes them one gelu_mlp op (GELU in the products' epilogues
  // on the GPU); BERT's default exact (erf) GELU is not cuBLASLt's, so it stays linear, gelu, linear.
  const bool tanh_gelu = act_ == BertActivation::GeluNew || act_ == BertActivation::GeluPytorchTanh;
  const Tensor ffn =
      tanh_gelu && !intermediate_dense.has_hooks() && !output_dense.has_hooks()
          ? gelu_mlp(h, intermediate_dense.weight, intermediate_dense.bias, output_dense.weight, output_dense.bias)
          : output_dense(activation(intermediate_dense(h), act_));
  return output_norm.forward_residual(output_dropout_(ffn), h).y;
}

BertModel::BertModel(BertConfig c, bool add_pooling_layer) : config((c.validate(), std::move(c))), embeddings(config) {
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) layers.push_back(std::make_shared<BertLayer>(config));
  encoder_.register_module("layer", layers);
  register_modules({{"embeddings", embeddings}, {"encoder", encoder_}});
  if (add_pooling_layer) {
    pooler_dense = std::make_shared<nn::Linear>(config.hidden_size, config.hidden_size);
    pooler_.register_module("dense", pooler_dense);
    register_module("pooler", pooler_);
  }
  init_weights(*this, config.initializer_range);
}

Tensor BertModel::forward(const Tensor& input_ids) {
  return std::get<0>(forward(input_ids, Tensor(), Tensor()));
}

std::tuple<Tensor, Tensor> BertModel::forward(const Tensor& input_ids, const Tensor& attention_mask,
                                              const Tensor& token_type_ids) {
  BRISK_CHECK(input_ids.dim() == 2, "BertModel: expected input_ids (B, T), got shape ", input_ids.sizes());
  BRISK_CHECK(input_ids.dtype() == DType::I64 || input_ids.dtype() == DType::I32,
              "BertModel: input_ids must be i32 or i64, got ", dtype_name(input_ids.dtype()));
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  BRISK_CHECK(T >= 1 && T <= config.max_position_embeddings, "BertModel: sequence length ", T,
              " must be in [1, max_position_embeddings = ", config.max_position_embeddings, "]");
  check_tokens(input_ids, attention_mask, "attention_mask", "BertModel");
  check_tokens(input_ids, token_type_ids, "token_type_ids", "BertModel");
  Tensor mask;  // (B, 1, 1, T): 0 for a token, the lowest f32 for padding (transformers' extended mask)
  if (attention_mask.defined())
    mask = ((attention_mask.detach().to(DType::F32) - 1.0) * static_cast<double>(std::numeric_limits<float>::max()))
               .view({B, 1, 1, T});
  Tensor x = embeddings(input_ids, token_type_ids);
  for (const auto& layer : layers) x = static_cast<BertLayer&>(*layer)(x, mask);
  Tensor pooled;
  if (pooler_dense) pooled = (*pooler_dense)(x.select(1, 0)).tanh();
  return {x, pooled};
}

BertForSequenceClassification::BertForSequenceClassification(BertConfig c)
    : bert(std::move(c), true),
      dropout(bert.config.classifier_dropout.value_or(bert.config.hidden_dropout_prob)),
      classifier(bert.config.hidden_size, bert.config.num_labels()) {
  register_modules({{"bert", bert}, {"dropout", dropout}, {"classifier", classifier}});
  init_weights(classifier, bert.config.initializer_range);
}

Tensor BertForSequenceClassification::forward(const Tensor& input_ids, const Tensor& attention_mask,
                                              const Tensor& token_type_ids) {
  auto [hidden, pooled] = bert(input_ids, attention_mask, token_type_ids);
  return classifier(dropout(pooled));
}

Tensor BertForSequenceClassification::loss(const Tensor& logits, const Tensor& labels) const {
  const int64_t n = bert.config.num_labels();
  BRISK_CHECK(logits.dim() == 2 && logits.size(1) == n, "BertForSequenceClassification::loss: expected logits (B, ", n,
              "), got ", logits.sizes());
  BertProblemType kind = bert.config.problem_type;
  if (kind == BertProblemType::Auto)
    kind = n == 1                        ? BertProblemType::Regression
           : !labels.is_floating_point() ? BertProblemType::SingleLabel
                                         : BertProblemType::MultiLabel;
  switch (kind) {
    case BertProblemType::Regression:
      BRISK_CHECK(labels.numel() == logits.numel(), "BertForSequenceClassification::loss: regression labels must ",
                  "have one value per logit ", logits.sizes(), ", got ", labels.sizes());
      return mse_loss(logits.reshape({-1}), labels.reshape({-1}).to(logits.dtype()));
    case BertProblemType::SingleLabel:
      BRISK_CHECK(labels.numel() == logits.size(0) && !labels.is_floating_point(),
                  "BertForSequenceClassification::loss: expected integer labels (", logits.size(0), "), got ",
                  labels.sizes(), " ", dtype_name(labels.dtype()));
      return cross_entropy(logits, labels.reshape({-1}));
    default:
      BRISK_CHECK(labels.sizes() == logits.sizes(), "BertForSequenceClassification::loss: multi-label targets must ",
                  "have the logits' shape ", logits.sizes(), ", got ", labels.sizes());
      return binary_cross_entropy_with_logits(logits, labels.to(logits.dtype()));
  }
}

BertForMaskedLM::BertForMaskedLM(BertConfig c)
    : bert(std::move(c), false),
      transform_dense(bert.config.hidden_size, bert.config.hidden_size),
      transform_norm(Shape{bert.config.hidden_size}, {.eps = bert.config.layer_norm_eps}) {
  bias = predictions_.register_parameter("bias", zeros({bert.config.vocab_size}, {.dtype = get_default_dtype()}));
  transform_.register_modules({{"dense", transform_dense}, {"LayerNorm", transform_norm}});
  predictions_.register_module("transform", transform_);
  cls_.register_module("predictions", predictions_);
  register_modules({{"bert", bert}, {"cls", cls_}});
  init_weights(transform_, bert.config.initializer_range);
}

Tensor BertForMaskedLM::forward(const Tensor& input_ids, const Tensor& attention_mask, const Tensor& token_type_ids) {
  auto [hidden, pooled] = bert(input_ids, attention_mask, token_type_ids);
  return predictions(hidden);
}

Tensor BertForMaskedLM::predictions(const Tensor& hidden) {
  Tensor t = transform_norm(activation(transform_dense(hidden), bert.config.hidden_act));
  return linear(t, bert.embeddings.word_embeddings.weight, bias);  // the decoder is the word embedding
}

Tensor BertForMaskedLM::loss(const Tensor& logits, const Tensor& labels) {
  BRISK_CHECK(
      logits.dim() == 3 && labels.dim() == 2 && logits.size(0) == labels.size(0) && logits.size(1) == labels.size(1),
      "BertForMaskedLM::loss: expected logits (B, T, V) and labels (B, T), got ", logits.sizes(), " and ",
      labels.sizes());
  const int64_t BT = logits.size(0) * logits.size(1);
  return cross_entropy(logits.reshape({BT, logits.size(2)}), labels.reshape({BT}));
}

}  // namespace brisk::models
