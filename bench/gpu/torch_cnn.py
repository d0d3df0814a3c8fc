"""The example CNN's training step in PyTorch on the GPU, for comparison with `bench_gpu --only cnn`
(a measurement tool only: nothing in brisk uses PyTorch). Same network (conv 1->16->32, 3x3,
padding 1, ReLU, 2x2 max-pool; linear 1568->256->10), batch 64, Adam(lr=1e-3), data already on
the GPU, no host synchronisation inside the timed loop, torch.backends.cudnn.benchmark = True;
fp32 and bf16 autocast, eager and torch.compile. Then the host's cost per call of the second
convolution's forward and backward (aten.convolution_backward with the input, weight and bias
gradients), as `bench_gpu --only cnn` measures brisk's. Prints one line and one JSON line per figure.

Usage: python3 bench/gpu/torch_cnn.py [--steps 2000] [--json FILE] [--no-compile]
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class FashionCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.f1 = nn.Linear(1568, 256)
        self.f2 = nn.Linear(256, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def run(bf16, compiled, steps):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    net = FashionCNN().to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(64, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    fwd = torch.compile(net) if compiled else net

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()

    for _ in range(30):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return steps * 64 / (t2 - t0), 1e6 * (t1 - t0) / steps, 1e6 * (t2 - t0) / steps


def conv_host_us(bf16):
    """Median host microseconds per call (enqueueing only) of the CNN's second convolution: x 64 x 16
    x 14 x 14, 32 filters of 3 x 3, padding 1; forward with bias, backward with all three gradients."""
    dev, dt = torch.device("cuda"), (torch.bfloat16 if bf16 else torch.float32)
    x, w = torch.randn(64, 16, 14, 14, device=dev, dtype=dt), torch.randn(32, 16, 3, 3, device=dev, dtype=dt)
    b, gy = torch.randn(32, device=dev, dtype=dt), torch.randn(64, 32, 14, 14, device=dev, dtype=dt)
    calls = {
        "fwd": lambda: torch.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        "bwd": lambda: torch.ops.aten.convolution_backward(gy, x, w, [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                           [True, True, True]),
    }
    out = {}
    for name, fn in calls.items():
        for _ in range(10):
            fn()
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                fn()
            times.append(1e6 * (time.perf_counter() - t0) / 100)
        torch.cuda.synchronize()
        out[name] = sorted(times)[2]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--json", default="")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    out = open(a.json, "w") if a.json else None
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}, cudnn {torch.backends.cudnn.version()}")
    for compiled in ([False] if a.no_compile else [False, True]):
        for bf16 in (False, True):
            name = f"cnn train b64 {'bf16 autocast' if bf16 else 'fp32'} {'compile' if compiled else 'eager'}"
            try:
                ips, host_us, wall_us = run(bf16, compiled, a.steps)
            except Exception as e:  # torch.compile may lack a compiler on the machine: say so
                print(f"{name}: failed: {type(e).__name__}: {str(e)[:300]}")
                continue
            print(f"{name:44s} {ips:10.0f} images/s  host enqueue {host_us:.1f} us/step, wall {wall_us:.1f} us/step")
            if out:
                out.write(json.dumps({"group": "cnn-torch", "name": name, "unit": "images/s", "value": ips,
                                      "torch": torch.__version__}) + "\n")
                out.flush()
    for bf16 in (False, True):
        mode = "bf16" if bf16 else "fp32"
        for name, us in conv_host_us(bf16).items():
            label = f"conv2 {name} host per call {mode}"
            print(f"{label:44s} {us:10.1f} us")
            if out:
                out.write(json.dumps({"group": "cnn-torch", "name": label, "unit": "us", "value": us,
                                      "torch": torch.__version__}) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
