#!/usr/bin/env python3
"""Sums the kernel times that bench/gpt2/kernel_profile.sh recorded (Nsight Compute CSV, metric
gpu__time_duration in nanoseconds) per kind of work and per kernel, per training step, for one or
more programs side by side (brisk and PyTorch).

    python3 bench/gpt2/kernel_table.py --steps 3 brisk_kernels.csv torch_kernels.csv [--top 25]

The kinds are read off the kernel names (matrix products, attention, layer norm, ...); every
kernel the program ran is counted, its set-up ones included, divided by --steps.
"""
import argparse
import collections
import csv
import io
import re
import sys

KINDS = [  # (kind, pattern on the lower-cased kernel name); the first match wins
    # cuDNN's SDPA backward runs helpers beside its flash kernel: rowsum(dO * O), and dQ either as
    # its own product (matmul_dq) or an f32 accumulator converted at the end (convert_dq).
    ("attention", r"flash|fmha|attention|attn|sdpa|cudnn::(matmul_dq|compute_dot_do_o|convert_dq)"),
    ("matmul", r"gemm|nvjet|cutlass|xmma|sm90_|cublas|splitk|matmul"),
    ("layer norm", r"layer_?norm|ln_"),
    ("softmax / cross-entropy", r"softmax|cross_entropy|nll|log_?softmax"),
    ("optimizer", r"adam|multi_tensor|foreach|clip|norm_sq|count_step"),
    ("embedding", r"embedding|index_select|indexing|gather|scatter|take"),
    ("gelu", r"gelu"),
    ("reduction", r"reduce|sum_|column|sum"),
    ("copy / cast", r"copy|cast|convert|contiguous|transpose|permute"),
    ("elementwise", r"elementwise|vectorized|unrolled|binary|unary|pointwise|fill|mul|add"),
]


def kind_of(name):
    n = name.lower()
    for kind, pat in KINDS:
        if re.search(pat, n):
            return kind
    return "other"


def short(name, width=90):
    n = re.sub(r"\(.*\)$", "", name)  # the argument list
    while True:  # template arguments, innermost first
        m = re.sub(r"<[^<>]*>", "", n)
        if m == n:
            break
        n = m
    return n if len(n) <= width else n[: width - 3] + "..."


def load(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')  # ncu prints its own lines before the table
    if start < 0:
        sys.exit(f"kernel_table: {path} holds no ncu CSV table")
    times = collections.defaultdict(float)
    counts = collections.Counter()
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        name = row["Kernel Name"]
        times[name] += v * scale  # microseconds
        counts[name] += 1
    return times, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--steps", type=int, default=1, help="training steps each program ran (time is divided by it)")
    ap.add_argument("--top", type=int, default=25, help="kernels listed per program")
    a = ap.parse_args()
    progs = [(p, *load(p)) for p in a.csv]
    kinds = collections.defaultdict(lambda: [0.0] * len(progs))
    for i, (_, times, _) in enumerate(progs):
        for name, t in times.items():
            kinds[kind_of(name)][i] += t / a.steps
    label = [p.rsplit("/", 1)[-1].replace("_kernels.csv", "") for p in a.csv]
    print(f"GPU time per step (ms), summed over kernels ({a.steps} steps counted)")
    print(f"{'kind':26}" + "".join(f"{l:>14}" for l in label))
    for kind, ts in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"{kind:26}" + "".join(f"{t / 1e3:14.3f}" for t in ts))
    print(f"{'total':26}" + "".join(f"{sum(k[i] for k in kinds.values()) / 1e3:14.3f}" for i in range(len(progs))))
    for (path, times, counts), l in zip(progs, label):
        total = sum(times.values())
        print(f"\n{l}: the {a.top} longest kernels (ms per step, launches per step, share)")
        for name, t in sorted(times.items(), key=lambda kv: -kv[1])[: a.top]:
            print(f"  {t / a.steps / 1e3:8.3f} {counts[name] / a.steps:7.1f} {100 * t / total:5.1f}%  "
                  f"[{kind_of(name)}] {short(name)}")


if __name__ == "__main__":
    main()
