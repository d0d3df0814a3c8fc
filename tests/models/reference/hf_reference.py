#!/usr/bin/env python3
"""The PyTorch reference for brisk's Hugging Face GPT-2 and BERT (tests/models/test_pretrained_reference.cpp).

transformers is not installed where brisk is developed, so this script computes what its
GPT2LMHeadModel, BertModel, BertForSequenceClassification and BertForMaskedLM compute, written out in
plain PyTorch from the facts of transformers' modeling_gpt2.py and modeling_bert.py (Conv1D weights
(in, out); GPT-2's tanh GELU and causal mask; BERT's post-LayerNorm layers, exact GELU, extended
attention mask (1 - mask) * finfo(float32).min added to the scores, pooler tanh(dense(first token)),
classifier on the dropped-out pooled output, MLM head dense-GELU-LayerNorm then the word embedding
plus cls.predictions.bias). Its modules carry transformers' parameter names, and it reads every
checkpoint back through its own safetensors reader by those names before computing anything, so
the folders and the outputs are tied by name as they would be in transformers.

    /usr/bin/python3 tests/models/reference/hf_reference.py --out tests/data/fixtures/hf

writes small random checkpoints (tiny sizes) in transformers' folder layout:
    gpt2/                   GPT2LMHeadModel, f32, "transformer." names, the old attn.bias and
                            attn.masked_bias buffers and a tied lm_head.weight copy
    gpt2_f16/               GPT2Model, f16, bare names, layer_norm_epsilon 1e-6, gelu_pytorch_tanh
    bert/                   BertModel, f32, bare names, the embeddings.position_ids buffer
    bert_cls_sharded/       BertForSequenceClassification (3 labels), f32, three shards and the index
    bert_pretraining_old/   BertForPreTraining, bf16, the old LayerNorm names (gamma, beta), a tied
                            cls.predictions.decoder.weight copy and the next-sentence head
and goldens/<folder>.safetensors with the inputs (padding and attention masks included) and the
outputs: GPT-2 logits; BERT last hidden states and pooled outputs; the classifier's logits, loss
and every parameter's gradient; the masked-LM logits and loss. All in eval mode, in float32.
"""
import argparse
import json
import math
import os
import shutil
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
          torch.bool: "BOOL"}
FROM_NAME = {v: k for k, v in DTYPES.items()}
NEG = torch.finfo(torch.float32).min


# --- safetensors and folders ----------------------------------------------------------------------

def safetensors_bytes(tensors, metadata=None):
    header = {"__metadata__": metadata or {"format": "pt"}}
    data, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        data.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dtype = FROM_NAME[info["dtype"]]
        raw = bytearray(blob[8 + n + b:8 + n + e])
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def write_folder(path, config, tensors, shard_bytes=None):
    """config.json (sorted keys, indent 2, as transformers writes it) and the weights, sharded in the
    given order as transformers' save_pretrained does when shard_bytes is set."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if not shard_bytes:
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors))
        return
    shards, size = [{}], 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        if shards[-1] and size + n > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += n
    weight_map = {}
    for i, shard in enumerate(shards):
        file = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        with open(os.path.join(path, file), "wb") as f:
            f.write(safetensors_bytes(shard))
        weight_map.update({name: file for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True)
                + "\n")


def read_folder(path):
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out = {}
    for file in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(os.path.join(path, file)))
    return out


def load_by_name(model, path, prefix, ignore=()):
    """Loads a folder into `model` as transformers resolves names: with or without the base-model
    prefix, old gamma/beta LayerNorm names, in the model's dtype; buffers and tied copies ignored."""
    own = model.state_dict()
    loaded = set()
    for name, t in read_folder(path).items():
        key = name
        if key.endswith(".gamma"):
            key = key[:-6] + ".weight"
        if key.endswith(".beta"):
            key = key[:-5] + ".bias"
        if key not in own and prefix + key in own:
            key = prefix + key
        if key not in own and key.startswith(prefix) and key[len(prefix):] in own:
            key = key[len(prefix):]
        if key not in own:
            assert any(s in key for s in ignore), "unexpected tensor " + name
            continue
        assert own[key].shape == t.shape, name
        own[key].copy_(t.to(own[key].dtype))
        loaded.add(key)
    missing = set(own) - loaded
    assert not missing, "missing " + str(sorted(missing))


def randomise(model, gen):
    """Random weights at a scale that keeps every activation and gradient away from zero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or ".ln_" in name or name.startswith("ln_") or "ln_f" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


# --- GPT-2 (transformers' GPT2LMHeadModel) ---------------------------------------------------------

class Conv1D(nn.Module):
    """transformers' Conv1D: weight (in, out), y = x W + b."""

    def __init__(self, n_out, n_in):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    def __init__(self, c, nh, eps):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(c, eps=eps)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(3 * c, c)
        self.attn.c_proj = Conv1D(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=eps)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(4 * c, c)
        self.mlp.c_proj = Conv1D(c, 4 * c)

    def attention(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).permute(0, 2, 1, 3) for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        w = torch.where(causal, w, torch.full([], NEG))
        if mask is not None:
            w = w + mask
        y = torch.matmul(F.softmax(w, dim=-1), v)
        return self.attn.c_proj(y.permute(0, 2, 1, 3).reshape(B, T, C))

    def forward(self, x, mask):
        x = x + self.attention(self.ln_1(x), mask)
        return x + self.mlp.c_proj(gelu_new(self.mlp.c_fc(self.ln_2(x))))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["n_embd"]
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(cfg["vocab_size"], c)
        self.transformer.wpe = nn.Embedding(cfg["n_positions"], c)
        self.transformer.h = nn.ModuleList(GPT2Block(c, cfg["n_head"], cfg["layer_norm_epsilon"])
                                           for _ in range(cfg["n_layer"]))
        self.transformer.ln_f = nn.LayerNorm(c, eps=cfg["layer_norm_epsilon"])

    def forward(self, ids, attention_mask=None):
        t = self.transformer
        mask = None if attention_mask is None else (1.0 - attention_mask[:, None, None, :].float()) * NEG
        x = t.wte(ids) + t.wpe(torch.arange(ids.size(1)))
        for block in t.h:
            x = block(x, mask)
        return F.linear(t.ln_f(x), t.wte.weight)  # lm_head tied to wte


# --- BERT (transformers' BertModel and heads) --------------------------------------------------------

ACT = {"gelu": F.gelu, "gelu_new": gelu_new, "relu": F.relu}


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.nh = cfg["num_attention_heads"]
        self.act = ACT[cfg["hidden_act"]]
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        for n in ("query", "key", "value"):
            setattr(self.attention.self, n, nn.Linear(h, h))
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(h, h)
        self.attention.output.LayerNorm = nn.LayerNorm(h, eps=eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(h, cfg["intermediate_size"])
        self.output = nn.Module()
        self.output.dense = nn.Linear(cfg["intermediate_size"], h)
        self.output.LayerNorm = nn.LayerNorm(h, eps=eps)

    def forward(self, x, mask):
        B, T, H = x.shape
        hd = H // self.nh
        s = self.attention.self
        q, k, v = (m(x).view(B, T, self.nh, hd).permute(0, 2, 1, 3) for m in (s.query, s.key, s.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        if mask is not None:
            scores = scores + mask
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(B, T, H)
        o = self.attention.output
        h = o.LayerNorm(o.dense(ctx) + x)
        inner = self.act(self.intermediate.dense(h))
        return self.output.LayerNorm(self.output.dense(inner) + h)


class BertModel(nn.Module):
    def __init__(self, cfg, pooler=True):
        super().__init__()
        h = cfg["hidden_size"]
        self.embeddings = nn.Module()
        e = self.embeddings
        e.word_embeddings = nn.Embedding(cfg["vocab_size"], h, padding_idx=cfg["pad_token_id"])
        e.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
        e.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
        e.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        if pooler:
            self.pooler = nn.Module()
            self.pooler.dense = nn.Linear(h, h)

    def forward(self, ids, attention_mask=None, token_type_ids=None):
        e = self.embeddings
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        x = e.word_embeddings(ids) + e.token_type_embeddings(token_type_ids)
        x = e.LayerNorm(x + e.position_embeddings(torch.arange(ids.size(1))))
        mask = None if attention_mask is None else (1.0 - attention_mask[:, None, None, :].float()) * NEG
        for layer in self.encoder.layer:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler.dense(x[:, 0])) if hasattr(self, "pooler") else None
        return x, pooled


class BertForSequenceClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.bert = BertModel(cfg)
        self.classifier = nn.Linear(cfg["hidden_size"], len(cfg["id2label"]))

    def forward(self, ids, attention_mask=None, token_type_ids=None):
        return self.classifier(self.bert(ids, attention_mask, token_type_ids)[1])  # dropout: eval mode


class BertForMaskedLM(nn.Module):
    def __init__(self, cfg, nsp=False):
        super().__init__()
        h = cfg["hidden_size"]
        self.act = ACT[cfg["hidden_act"]]
        self.bert = BertModel(cfg, pooler=nsp)
        self.cls = nn.Module()
        p = self.cls.predictions = nn.Module()
        p.bias = nn.Parameter(torch.zeros(cfg["vocab_size"]))
        p.transform = nn.Module()
        p.transform.dense = nn.Linear(h, h)
        p.transform.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        if nsp:  # BertForPreTraining's next-sentence head
            self.cls.seq_relationship = nn.Linear(h, 2)

    def forward(self, ids, attention_mask=None, token_type_ids=None):
        x, _ = self.bert(ids, attention_mask, token_type_ids)
        t = self.cls.predictions.transform
        y = t.LayerNorm(self.act(t.dense(x)))
        return F.linear(y, self.bert.embeddings.word_embeddings.weight, self.cls.predictions.bias)


# --- fixtures ------------------------------------------------------------------------------------------

GPT2_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50, "embd_pdrop": 0.1, "eos_token_id": 50, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_inner": None,
    "n_layer": 2, "n_positions": 16, "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "torch_dtype": "float32", "use_cache": True, "vocab_size": 51}

BERT_CONFIG = {
    "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "classifier_dropout": None,
    "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 16,
    "initializer_range": 0.02, "intermediate_size": 24, "layer_norm_eps": 1e-12, "max_position_embeddings": 16,
    "model_type": "bert", "num_attention_heads": 2, "num_hidden_layers": 2, "pad_token_id": 0,
    "position_embedding_type": "absolute", "torch_dtype": "float32", "type_vocab_size": 2, "use_cache": True,
    "vocab_size": 40}

# Three sequences of 7: whole, right-padded (3 padding), left-padded (2 padding).
MASK = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [0] * 2 + [1] * 5])
TYPES = torch.tensor([[0] * 4 + [1] * 3, [0] * 2 + [1] * 2 + [0] * 3, [0] * 4 + [1] * 3])


def token_ids(vocab, gen, pad=0):
    ids = torch.randint(1, vocab, MASK.shape, generator=gen)
    return torch.where(MASK.bool(), ids, torch.full_like(ids, pad))


def state(model, rename=lambda n: n, dtype=None):
    return {rename(n): (p.detach().to(dtype) if dtype else p.detach()) for n, p in model.state_dict().items()}


def make_gpt2(out, gen):
    cfg = dict(GPT2_CONFIG)
    ref = GPT2LMHeadModel(cfg)
    randomise(ref, gen)
    tensors = state(ref)
    for i in range(cfg["n_layer"]):  # the buffers older transformers saved
        tensors["transformer.h.%d.attn.bias" % i] = torch.tril(torch.ones(16, 16, dtype=torch.bool)).view(1, 1, 16, 16)
        tensors["transformer.h.%d.attn.masked_bias" % i] = torch.tensor(-1e4)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    write_folder(os.path.join(out, "gpt2"), cfg, tensors)
    ref = GPT2LMHeadModel(cfg)
    load_by_name(ref, os.path.join(out, "gpt2"), "transformer.", ignore=("attn.bias", "masked_bias", "lm_head"))
    ids = token_ids(cfg["vocab_size"], gen)
    with torch.no_grad():
        goldens = {"input_ids": ids, "attention_mask": MASK, "logits": ref(ids, MASK), "logits_nomask": ref(ids)}
    write_goldens(out, "gpt2", goldens)

    # GPT2Model's layout (no prefix) in f16, another epsilon and GELU spelling.
    cfg16 = dict(cfg, architectures=["GPT2Model"], layer_norm_epsilon=1e-6, activation_function="gelu_pytorch_tanh",
                 torch_dtype="float16")
    ref16 = GPT2LMHeadModel(cfg16)
    randomise(ref16, gen)
    write_folder(os.path.join(out, "gpt2_f16"), cfg16,
                 state(ref16, lambda n: n[len("transformer."):], torch.float16))
    ref16 = GPT2LMHeadModel(cfg16)
    load_by_name(ref16, os.path.join(out, "gpt2_f16"), "transformer.")
    with torch.no_grad():
        write_goldens(out, "gpt2_f16", {"input_ids": ids, "attention_mask": MASK, "logits": ref16(ids, MASK)})


def make_bert(out, gen):
    cfg = dict(BERT_CONFIG)
    ref = BertModel(cfg)
    randomise(ref, gen)
    tensors = state(ref)
    tensors["embeddings.position_ids"] = torch.arange(16).view(1, 16)  # older transformers saved it
    write_folder(os.path.join(out, "bert"), cfg, tensors)
    ref = BertModel(cfg)
    load_by_name(ref, os.path.join(out, "bert"), "bert.", ignore=("position_ids",))
    ids = token_ids(cfg["vocab_size"], gen)
    with torch.no_grad():
        hidden, pooled = ref(ids, MASK, TYPES)
        hidden_nomask, pooled_nomask = ref(ids)
    write_goldens(out, "bert", {"input_ids": ids, "attention_mask": MASK, "token_type_ids": TYPES,
                                "last_hidden_state": hidden, "pooler_output": pooled,
                                "last_hidden_state_nomask": hidden_nomask, "pooler_output_nomask": pooled_nomask})


def make_bert_classifier(out, gen):
    labels = {"0": "negative", "1": "neutral", "2": "positive"}
    cfg = dict(BERT_CONFIG, architectures=["BertForSequenceClassification"], id2label=labels,
               label2id={v: int(k) for k, v in labels.items()}, hidden_act="gelu")
    ref = BertForSequenceClassification(cfg)
    randomise(ref, gen)
    path = os.path.join(out, "bert_cls_sharded")
    write_folder(path, cfg, state(ref), shard_bytes=8000)
    ref = BertForSequenceClassification(cfg)
    load_by_name(ref, path, "bert.")
    ids = token_ids(cfg["vocab_size"], gen)
    y = torch.tensor([2, 0, 1])
    logits = ref(ids, MASK, TYPES)
    loss = F.cross_entropy(logits.view(-1, 3), y.view(-1))
    loss.backward()
    goldens = {"input_ids": ids, "attention_mask": MASK, "token_type_ids": TYPES, "labels": y,
               "logits": logits.detach(), "loss": loss.detach()}
    goldens.update({"grad." + n: p.grad for n, p in ref.named_parameters()})
    write_goldens(out, "bert_cls_sharded", goldens)


def make_bert_pretraining_old(out, gen):
    cfg = dict(BERT_CONFIG, architectures=["BertForPreTraining"], torch_dtype="bfloat16")
    ref = BertForMaskedLM(cfg, nsp=True)
    randomise(ref, gen)
    tensors = state(ref, lambda n: n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                                          "LayerNorm.beta"),
                    torch.bfloat16)
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"].clone()
    path = os.path.join(out, "bert_pretraining_old")
    write_folder(path, cfg, tensors)
    ref = BertForMaskedLM(cfg, nsp=True)
    load_by_name(ref, path, "bert.", ignore=("decoder.weight",))
    ids = token_ids(cfg["vocab_size"], gen)
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[0, 5], labels[1, 2], labels[2, 4] = 7, 3, 11, 39
    with torch.no_grad():
        logits = ref(ids, MASK, TYPES)
        loss = F.cross_entropy(logits.view(-1, cfg["vocab_size"]), labels.view(-1))
    write_goldens(out, "bert_pretraining_old", {"input_ids": ids, "attention_mask": MASK, "token_type_ids": TYPES,
                                                "labels": labels, "logits": logits, "loss": loss})


def write_goldens(out, name, tensors):
    os.makedirs(os.path.join(out, "goldens"), exist_ok=True)
    tensors = {k: (v.float() if v.is_floating_point() else v.long()) for k, v in tensors.items()}
    with open(os.path.join(out, "goldens", name + ".safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors, {"generator": "tests/models/reference/hf_reference.py"}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the checkpoints and goldens")
    args = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    make_gpt2(args.out, gen)
    make_bert(args.out, gen)
    make_bert_classifier(args.out, gen)
    make_bert_pretraining_old(args.out, gen)


if __name__ == "__main__":
    main()
