#!/usr/bin/env python3
"""Sums a Chrome trace (libtorch's RecordProfile, as `bench/libtorch_cnn --profile FILE` writes)
by op name: calls, self time (the op's duration less that of the ops it called, so nested ops such
as aten::linear -> aten::addmm are not counted twice) and total time, per training step.

Usage: bench/trace_by_op.py TRACE.json [--steps N] [--top K]
"""
import argparse
import collections
import json
import sys


def load_events(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = []
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        out.append((float(e["ts"]), float(e["dur"]), e["name"], (e.get("pid"), e.get("tid"))))
    return out


def by_op(events):
    """Returns {name: [calls, self_us, total_us]}; self = duration - children's durations, per thread."""
    stats = collections.defaultdict(lambda: [0, 0.0, 0.0])
    threads = collections.defaultdict(list)
    for ts, dur, name, thread in events:
        threads[thread].append((ts, -dur, name))
    for evs in threads.values():
        evs.sort()  # by start, the longer (enclosing) event first
        stack = []  # [end, name, children_us]
        for ts, negdur, name in evs:
            dur = -negdur
            while stack and ts >= stack[-1][0]:
                end, n, child = stack.pop()
                stats[n][1] -= child
            if stack:
                stack[-1][2] += dur
            s = stats[name]
            s[0] += 1
            s[1] += dur
            s[2] += dur
            stack.append([ts + dur, name, 0.0])
        while stack:
            end, n, child = stack.pop()
            stats[n][1] -= child
    return stats


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--steps", type=int, default=1, help="training steps in the trace (figures are per step)")
    p.add_argument("--top", type=int, default=20, help="rows to print")
    a = p.parse_args()
    if a.steps < 1 or a.top < 1:
        sys.exit("trace_by_op: --steps and --top must be positive")
    try:
        stats = by_op(load_events(a.trace))
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"trace_by_op: cannot read {a.trace}: {e}")
    if not stats:
        sys.exit(f"trace_by_op: no complete ('X') events in {a.trace}")
    total_self = sum(s[1] for s in stats.values())
    print(f"{'op':40s} {'calls/step':>10s} {'self ms/step':>13s} {'self %':>7s} {'total ms/step':>14s}")
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
    for name, (calls, self_us, tot_us) in rows[: a.top]:
        print(f"{name[:40]:40s} {calls / a.steps:10.1f} {self_us / a.steps / 1e3:13.3f} "
              f"{100 * self_us / total_self:6.1f}% {tot_us / a.steps / 1e3:14.3f}")
    rest = sum(s[1] for _, s in rows[a.top:])
    print(f"{'(the rest)':40s} {'':10s} {rest / a.steps / 1e3:13.3f} {100 * rest / total_self:6.1f}%")
    print(f"{'all ops (self)':40s} {'':10s} {total_self / a.steps / 1e3:13.3f}")


if __name__ == "__main__":
    main()
