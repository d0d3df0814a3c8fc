#!/usr/bin/env python3
"""GPT-2 in PyTorch, the independent reference for brisk's (models::GPT2, examples/gpt2).

  check DIR   reads what bench/gpt2/gpt2_reference wrote into DIR (config, initial weights, a batch
              and brisk's loss, logits, gradients and AdamW losses), runs the same in PyTorch and
              prints the largest differences; exit status 1 if one is past its bound.
  bench       times PyTorch's GPT-2 training step as its users run it (F.scaled_dot_product_attention,
              AdamW(fused=True) on a GPU, bf16 autocast), eager and with torch.compile: tokens/s,
              step time, peak GPU memory, MFU.

Both write JSON lines with --json. The model is nanoGPT's layout with brisk's parameter names
(h<l>.attn.c_attn, h<l>.c_fc, ...; the output head tied to wte). docs/gpt2.md explains the bounds.
"""
import argparse
import json
import math
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # as models::GPT2Config::preset
    "tiny": dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=256),
    "small": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=256),
    "124M": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304),
    "350M": dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, vocab_size=50304),
}

# Bounds of `check` (docs/gpt2.md). fp32: llm.c's test_gpt2 (loss 1e-5, logits 1e-3), each gradient
# relative to its tensor's largest, and the losses of the AdamW steps. bf16 autocast: both sides
# round every product's inputs to 8 bits of mantissa, at different places, so they are not compared
# with each other but each with PyTorch in fp32 on the same weights: brisk's deviation must stay
# within twice PyTorch's own (or the floor below, when PyTorch's is smaller than that).
BOUNDS_FP32 = dict(loss=1e-5, logits=1e-3, grad_rel=1e-3, losses=1e-4)
FLOORS_BF16 = dict(loss=1e-3, logits=2e-2, grad_rel=2e-2, losses=1e-2)


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(c)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(c, 3 * c)
        self.attn.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.x: the attention its users wrote (as nanoGPT did)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        for i in range(n_layer):
            self.add_module(f"h{i}", Block(n_embd, n_head))
        self.n_layer = n_layer
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():  # GPT-2's initialisation (bench mode)
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif ".ln_" not in name and not name.startswith("ln_"):
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for i in range(self.n_layer):
            x = getattr(self, f"h{i}")(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


def loss_of(logits, targets):
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def param_groups(model, wd):  # weight decay on the 2-D weights only, as GPT2::param_groups
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


def read_safetensors(path):
    """The safetensors format read by hand (no dependency): 8-byte header length, JSON header, data."""
    kinds = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
             "BF16": torch.bfloat16, "F16": torch.float16}
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = bytearray(blob[8 + n:])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        dt = kinds[info["dtype"]]
        size = torch.empty(0, dtype=dt).element_size()
        t = torch.frombuffer(data, dtype=dt, count=(hi - lo) // size, offset=lo) if hi > lo else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def run_torch(cfg, weights, batch, device, bf16):
    """Loss, logits and gradients of the first step, and the losses of cfg['steps'] AdamW steps."""
    model = GPT2(*(cfg[k] for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"))).to(device)
    names = dict(model.named_parameters())
    missing = sorted(set(names) ^ set(weights))
    if missing:
        sys.exit(f"torch_gpt2 check: parameter names differ between brisk and this model: {missing[:5]}")
    with torch.no_grad():
        for n, p in names.items():
            p.copy_(weights[n])
    idx, targets = batch["idx"].to(device), batch["targets"].to(device)
    opt = torch.optim.AdamW(param_groups(model, cfg["weight_decay"]), lr=cfg["lr"],
                            betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    out = dict(losses=[])
    for step in range(cfg["steps"]):
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            logits = model(idx)
            loss = loss_of(logits, targets)
        loss.backward()
        out["losses"].append(loss.item())
        if step == 0:
            out["loss"] = loss.item()
            out["logits"] = logits.detach().float().cpu()
            out["grads"] = {n: p.grad.detach().float().cpu() for n, p in names.items()}
        opt.step()
        opt.zero_grad(set_to_none=True)
    return out


def differences(a, ref):
    """Largest differences of run `a` against run `ref` (both as run_torch returns)."""
    worst, worst_name = 0.0, ""
    for n, g in ref["grads"].items():
        rel = (a["grads"][n] - g).abs().max().item() / max(g.abs().max().item(), 1e-30)
        if rel > worst:
            worst, worst_name = rel, n
    return dict(loss=abs(a["loss"] - ref["loss"]), logits=(a["logits"] - ref["logits"]).abs().max().item(),
                grad_rel=worst, grad_worst=worst_name,
                losses=max(abs(x - y) for x, y in zip(a["losses"], ref["losses"])))


def check(args):
    d = args.dir
    cfg = json.load(open(f"{d}/config.json"))
    device = args.device or ("cuda" if cfg["device"].startswith("cuda") else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (brisk's default too)
    torch.backends.cudnn.allow_tf32 = False
    weights, batch, mine = (read_safetensors(f"{d}/{n}.safetensors") for n in ("model", "batch", "brisk"))
    brisk = dict(loss=mine["loss"].item(), logits=mine["logits"], losses=mine["losses"].tolist(),
                 grads={n[len("grad."):]: t for n, t in mine.items() if n.startswith("grad.")})
    bf16 = cfg["mixed_precision"] == "bf16"
    fp32 = run_torch(cfg, weights, batch, device, bf16=False)
    dev = differences(brisk, fp32)
    keys = list(BOUNDS_FP32)
    if bf16:
        torch_bf16 = run_torch(cfg, weights, batch, device, bf16=True)
        dev_torch = differences(torch_bf16, fp32)
        bounds = {k: max(2 * dev_torch[k], FLOORS_BF16[k]) for k in keys}
    else:
        dev_torch, bounds = None, dict(BOUNDS_FP32)
    ok = all(dev[k] <= bounds[k] for k in keys)
    row = dict(mode="check", torch=torch.__version__, device=device,
               gpu=torch.cuda.get_device_name() if device.startswith("cuda") else None,
               preset=cfg["preset"], batch=cfg["batch"], seq=cfg["seq"], steps=cfg["steps"],
               mixed_precision=cfg["mixed_precision"], loss=brisk["loss"], max_diff=dev,
               torch_bf16_max_diff=dev_torch, bounds=bounds, torch_fp32_losses=fp32["losses"],
               brisk_losses=brisk["losses"], ok=ok)
    what = "brisk in bf16 against PyTorch in fp32" if bf16 else "brisk against PyTorch, both fp32"
    print(f"torch {torch.__version__} on {device}, GPT-2 {cfg['preset']}, batch {cfg['batch']} x {cfg['seq']}, "
          f"{what}: brisk's loss {brisk['loss']:.6f}, PyTorch's {fp32['loss']:.6f}")
    for k in keys:
        extra = f" ({dev['grad_worst']})" if k == "grad_rel" else ""
        theirs = f"  (PyTorch bf16: {dev_torch[k]:.3e})" if bf16 else ""
        print(f"  {k:9s} max difference {dev[k]:.3e}  bound {bounds[k]:.1e}  "
              f"{'ok' if dev[k] <= bounds[k] else 'PAST THE BOUND'}{extra}{theirs}")
    print("  losses   brisk       " + " ".join(f"{x:.5f}" for x in brisk["losses"]))
    print("           PyTorch fp32 " + " ".join(f"{x:.5f}" for x in fp32["losses"]))
    if bf16:
        print("           PyTorch bf16 " + " ".join(f"{x:.5f}" for x in torch_bf16["losses"]))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0 if ok else 1


def bench(args):
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    cfg = dict(PRESETS[args.preset])
    torch.manual_seed(0)
    model = GPT2(**cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_matmul = n_params - model.wpe.weight.numel()  # as examples/gpt2 --bench counts it
    B, T = args.batch, args.seq
    opt_kw = dict(fused=True) if cuda else {}
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **opt_kw)
    step_model = torch.compile(model) if args.compile else model
    g = torch.Generator(device="cpu").manual_seed(1)
    data = torch.randint(0, min(cfg["vocab_size"], 50257), (B, T + 1), generator=g).to(device)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    bf16 = args.mixed_precision == "bf16"

    def step():
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(step_model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    loss.item()  # waits for the last step
    s = time.perf_counter() - t0
    tokens_s = args.steps * B * T / s
    flops_per_token = 6 * n_matmul + 12 * cfg["n_layer"] * cfg["n_embd"] * T
    row = dict(mode="bench", torch=torch.__version__, device=device,
               gpu=torch.cuda.get_device_name() if cuda else None, preset=args.preset, batch=B, seq=T,
               mixed_precision=args.mixed_precision, compile=args.compile, steps=args.steps,
               tokens_per_s=tokens_s, step_ms=1e3 * s / args.steps, loss=loss.item(),
               peak_bytes=torch.cuda.max_memory_allocated() if cuda else None,
               mfu=tokens_s * flops_per_token / (args.peak_tflops * 1e12) if cuda else None)
    print(json.dumps(row))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check", help="compare with what gpt2_reference wrote")
    c.add_argument("dir")
    c.add_argument("--device", help="cpu or cuda (default: the device brisk ran on)")
    c.add_argument("--json", help="append the result as a JSON line to this file")
    b = sub.add_parser("bench", help="time PyTorch's training step")
    b.add_argument("--preset", default="124M", choices=sorted(PRESETS))
    b.add_argument("--batch", type=int, default=16)
    b.add_argument("--seq", type=int, default=1024)
    b.add_argument("--steps", type=int, default=20)
    b.add_argument("--warmup", type=int, default=5)
    b.add_argument("--mixed_precision", default="bf16", choices=["no", "bf16"])
    b.add_argument("--compile", action="store_true", help="torch.compile the model")
    b.add_argument("--device")
    b.add_argument("--peak_tflops", type=float, default=989.0,
                   help="the GPU's dense bf16 peak for MFU (H100 SXM: 989)")
    b.add_argument("--json")
    a = ap.parse_args()
    return check(a) if a.mode == "check" else bench(a)


if __name__ == "__main__":
    sys.exit(main())
