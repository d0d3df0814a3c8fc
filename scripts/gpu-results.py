#!/usr/bin/env python3
"""Writes bench/results/gpu-<date>.json from what scripts/gpu-check.sh left in its OUT folder:
the GPU and driver as nvidia-smi reported them, the date, the commit, the `cuda` tests run /
passed / failed / skipped, compute-sanitizer's verdict, and every figure beside its reference
(copy bandwidth, cuBLASLt, PyTorch eager and torch.compile), each with the ratio. Figures that
were not measured are left out, never filled in.

Usage: scripts/gpu-results.py OUT [OUT...] [--commit SHA] [--output FILE]
Several OUT folders (one per GPU window of the same day) are merged, later ones winning. A figure
measured in several rounds (the CNN's, alternating with PyTorch's) is the median of its rounds.
When the gpt2 or zero stages ran, it also writes bench/results/gpt2-<date>.json: the GPU, driver,
date and commit, the configuration, brisk's tokens/s, MFU, step time and peak memory beside
PyTorch eager's and torch.compile's (medians of the rounds), the correctness differences against
PyTorch (fp32 and bf16), the step under each sharding stage, the step under each
BRISK_CUDA_DGELU_EPILOGUE (stage dgelu) and GPT-2 350M's three columns (stage gpt2_350m).
"""
import argparse
import json
import os
import sys


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="+")
    ap.add_argument("--commit", default="")
    ap.add_argument("--output", default="")
    a = ap.parse_args()

    result = {"figures": {}}
    torch_cnn = {}
    gpt2 = {"bench": [], "check": [], "zero": [], "dgelu": [], "350m": []}
    for out in a.out:
        summary_path = os.path.join(out, "summary.json")
        if not os.path.exists(summary_path):
            sys.exit(f"gpu-results: {summary_path} is missing (run scripts/gpu-check.sh first)")
        with open(summary_path) as f:
            s = json.load(f)
        for k in ("gpu", "driver", "date"):
            result[k] = s.get(k, result.get(k))
        result["commit"] = a.commit or s.get("commit", "")
        if "tests" in s:
            result["tests_cuda_label"] = s["tests"]
        if "stage_memcheck" in s:
            m = s["stage_memcheck"]
            result["compute_sanitizer_memcheck_every_op_test"] = (
                "clean" if isinstance(m, dict) and m.get("rc") == 0 else m)
        for stage in ("train_no", "train_bf16", "trainsh"):
            if f"stage_{stage}" in s:
                result.setdefault("runs", {})[stage] = s[f"stage_{stage}"]
            if f"{stage}_last_epoch" in s:
                result.setdefault("runs", {})[f"{stage}_last_epoch"] = s[f"{stage}_last_epoch"]
        if "runs" in result and any(f"stage_{x}" in s for x in ("train_no", "train_bf16", "trainsh")):
            result["runs"]["commit"] = s.get("commit", "")
        rows = {}
        for row in read_jsonl(os.path.join(out, "bench_gpu.jsonl")):
            rows.setdefault(row["name"], []).append(row)
        for name, rs in rows.items():
            r = rs[0]
            fig = {"group": r["group"], "value": median([x["value"] for x in rs]), "unit": r["unit"],
                   "reference": r["reference"], "reference_value": median([x["reference_value"] for x in rs])}
            fig["ratio"] = fig["value"] / fig["reference_value"] if fig["reference_value"] else 0
            if len(rs) > 1:
                fig["runs"] = [x["value"] for x in rs]
            fig["commit"] = a.commit if len(a.out) == 1 and a.commit else s.get("commit", "")
            result["figures"][name] = fig
        gpt2["bench"] += read_jsonl(os.path.join(out, "gpt2_bench.jsonl"))
        gpt2["check"] += read_jsonl(os.path.join(out, "gpt2_check.jsonl"))
        gpt2["zero"] += read_jsonl(os.path.join(out, "zero_gpu.jsonl"))
        gpt2["dgelu"] += read_jsonl(os.path.join(out, "gpt2_dgelu.jsonl"))
        gpt2["350m"] += read_jsonl(os.path.join(out, "gpt2_350m.jsonl"))
        peers = {}
        for row in read_jsonl(os.path.join(out, "torch_cnn.jsonl")):
            peers.setdefault(row["name"], []).append(row)
        for name, rs in peers.items():
            torch_cnn[name] = dict(rs[0], value=median([x["value"] for x in rs]), runs=[x["value"] for x in rs])

    # The CNN's images/s against PyTorch's, eager and compiled, as ratios.
    for name, fig in result["figures"].items():
        if fig["group"] != "cnn":
            continue
        for mode in ("eager", "compile"):
            peer = torch_cnn.get(f"{name} {mode}")
            if peer:
                fig[f"pytorch_{mode}"] = peer["value"]
                if len(peer["runs"]) > 1:
                    fig[f"pytorch_{mode}_runs"] = peer["runs"]
                fig[f"ratio_vs_pytorch_{mode}"] = fig["value"] / peer["value"]
                fig["pytorch_version"] = peer.get("torch", "")
        fig.pop("reference", None), fig.pop("reference_value", None), fig.pop("ratio", None)

    date = (result.get("date") or "unknown")[:10]
    path = a.output or os.path.join(os.path.dirname(__file__), "..", "bench", "results", f"gpu-{date}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"gpu-results: wrote {os.path.normpath(path)}")
    if any(gpt2.values()):
        write_gpt2(result, gpt2, a.output and os.path.join(os.path.dirname(a.output), f"gpt2-{date}.json"), date)


def impl_key(row):
    """brisk, brisk_cuda_graph, brisk_dgelu_<mode> (by_dgelu), pytorch_eager or pytorch_compile."""
    if row.get("impl") == "brisk":
        return "brisk_cuda_graph" if row.get("cuda_graph") else "brisk"
    return "pytorch_compile" if row.get("compile") else "pytorch_eager"


def columns(rows, key=impl_key):
    """Medians of tokens/s, step, MFU and peak bytes per column, with each column's rounds, and
    brisk's ratios to PyTorch eager and torch.compile."""
    impls, out = {}, {}
    for row in rows:
        impls.setdefault(key(row), []).append(row)
    for k, rs in impls.items():
        fig = {f: median([r[f] for r in rs]) for f in ("tokens_per_s", "step_ms", "mfu", "peak_bytes")
               if all(r.get(f) is not None for r in rs)}
        fig["runs_tokens_per_s"] = [r["tokens_per_s"] for r in rs]
        for f in ("torch", "attention", "dgelu_epilogue"):
            if rs[0].get(f):
                fig[f] = rs[0][f]
        out[k] = fig
        out["configuration"] = {f: rs[0].get(f) for f in ("preset", "batch", "seq", "mixed_precision")}
    for mine in [k for k in impls if k.startswith("brisk")]:
        for peer in ("pytorch_eager", "pytorch_compile"):
            if peer in out:
                out[f"{mine}_vs_{peer}"] = out[mine]["tokens_per_s"] / out[peer]["tokens_per_s"]
    return out


def write_gpt2(result, gpt2, path, date):
    out = {k: result.get(k) for k in ("gpu", "driver", "date", "commit")}
    out.update(columns(gpt2["bench"]))
    if gpt2["dgelu"]:
        out["dgelu_epilogue"] = columns(
            gpt2["dgelu"], lambda r: f"brisk_{r.get('dgelu_epilogue')}" if r.get("impl") == "brisk" else impl_key(r))
    if gpt2["350m"]:
        out["gpt2_350m"] = columns(gpt2["350m"])
    if gpt2["check"]:
        out["correctness"] = {r["mixed_precision"]: {k: r[k] for k in ("preset", "batch", "seq", "steps", "loss",
                                                                       "max_diff", "bounds", "ok", "torch")}
                              for r in gpt2["check"]}
    if gpt2["zero"]:
        out["sharding_world_of_one"] = {r.get("sharding", "none"): {k: r.get(k) for k in ("tokens_per_s", "step_ms",
                                                                              "peak_bytes")}
                                        for r in gpt2["zero"]}
    path = path or os.path.join(os.path.dirname(__file__), "..", "bench", "results", f"gpt2-{date}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"gpu-results: wrote {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
