#!/usr/bin/env python3
"""Interleaved A/B comparison of Google Benchmark programs from two builds.

Runs each program of build A, then the same program of build B (B first in odd rounds), and
repeats that `--rounds` times, so that both builds see the same machine load; prints the median real time and CPU time
of every case per build and the ratio B/A of the medians. Meant for a loaded, shared machine
where single runs are unreliable. The minimum CPU time over all rounds and repetitions is printed
too: for single-threaded, CPU-bound cases it is the least disturbed estimate of the cost.

  bench/ab_bench.py --a /tmp/before --a-libs /tmp/before --b build-cpu/bench \\
      --rounds 7 bench_gemm:'BM_BriskLayerGemm' bench_conv:'BM_Conv2d'

Each positional argument is PROGRAM[:FILTER] (a --benchmark_filter regex). --a-libs / --b-libs
prepend a folder to LD_LIBRARY_PATH for that build (to run a saved copy of the binaries and
the shared libraries they were built with).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(prog_dir, libs, prog, flt, min_time, reps):
    env = dict(os.environ)
    if libs:
        env["LD_LIBRARY_PATH"] = libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    cmd = [os.path.join(prog_dir, prog), "--benchmark_format=json", f"--benchmark_min_time={min_time}",
           f"--benchmark_repetitions={reps}"]
    if flt:
        cmd.append(f"--benchmark_filter={flt}")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        res.setdefault(b.get("run_name", b["name"]), []).append((b["real_time"] * unit, b["cpu_time"] * unit))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="folder of build A's benchmark programs")
    p.add_argument("--b", required=True, help="folder of build B's benchmark programs")
    p.add_argument("--a-libs", default="", help="LD_LIBRARY_PATH prefix for A")
    p.add_argument("--b-libs", default="", help="LD_LIBRARY_PATH prefix for B")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-time", default="0.1")
    p.add_argument("--reps", type=int, default=1, help="--benchmark_repetitions per run")
    p.add_argument("programs", nargs="+", help="PROGRAM[:FILTER]")
    args = p.parse_args()

    samples = {"A": {}, "B": {}}
    order = []
    for r in range(args.rounds):
        for spec in args.programs:
            prog, _, flt = spec.partition(":")
            pair = [("A", args.a, args.a_libs), ("B", args.b, args.b_libs)]
            for tag, d, libs in pair if r % 2 == 0 else pair[::-1]:  # A B, B A, ...: no order bias
                for name, ts in run(d, libs, prog, flt, args.min_time, args.reps).items():
                    if name not in order:
                        order.append(name)
                    samples[tag].setdefault(name, []).extend(ts)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print(f"medians of {args.rounds} interleaved rounds x {args.reps} repetitions, milliseconds per call "
          "(real / CPU of the main thread), and the minimum CPU time")
    print(f"{'case':62s} {'A real':>9s} {'B real':>9s} {'B/A':>6s} {'A cpu':>9s} {'B cpu':>9s} {'B/A':>6s}"
          f" {'A min':>9s} {'B min':>9s} {'B/A':>6s}")
    for name in order:
        a = samples["A"].get(name, [])
        b = samples["B"].get(name, [])
        if not a or not b:
            continue
        ar, br = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
        ac, bc = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
        am, bm = min(x[1] for x in a), min(x[1] for x in b)
        print(f"{name:62s} {ar:9.3f} {br:9.3f} {br / ar:6.2f} {ac:9.3f} {bc:9.3f} {bc / ac:6.2f}"
              f" {am:9.3f} {bm:9.3f} {bm / am:6.2f}")


if __name__ == "__main__":
    main()
