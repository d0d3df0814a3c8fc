#!/usr/bin/env python3
"""Draws one zero3 training step of BRISK_TRACE files (one per rank) as an SVG timeline.

    python3 docs/zero3_trace_svg.py OUT.svg TRACE.rank0.json TRACE.rank1.json [--step K]

Per rank three lanes: computation (tid 0: forward, backward, optimizer step, the waits for an
all-gather that had not finished when its unit was needed), the units' gathered lifetimes (tid 2:
from the moment a unit's parameters were ready to its release) and the communication thread
(tid 1: each unit's all-gather from its issue, a prefetch while the previous unit computes, to
its completion). --step picks the training step by its "forward" span (default: the last).
Standard library only.
"""
import argparse
import json

COLORS = {"forward": "#4e79a7", "backward": "#f28e2b", "optimizer step": "#59a14f"}
UNIT_COLORS = {"(root)": "#b07aa1", "h0": "#e15759", "h1": "#76b7b2", "ln_f": "#edc948"}


def unit_of(name):
    for prefix in ("wait all-gather ", "all-gather "):
        if name.startswith(prefix):
            return name[len(prefix):]
    if name.endswith(" gathered"):
        return name[: -len(" gathered")]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--step", type=int, default=-1)
    args = ap.parse_args()
    ranks = []
    for path in args.traces:
        with open(path) as f:
            ranks.append([e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"])
    # The window: the chosen step's forward to the end of the optimizer step after it (rank 0).
    fwd = sorted((e for e in ranks[0] if e["name"] == "forward"), key=lambda e: e["ts"])[args.step]
    step = min((e for e in ranks[0] if e["name"] == "optimizer step" and e["ts"] >= fwd["ts"]),
               key=lambda e: e["ts"])
    t0, t1 = fwd["ts"] - 200, step["ts"] + step["dur"] + 200
    width, left, lane, gap = 1100, 120, 26, 18
    scale = (width - left - 20) / (t1 - t0)
    height = 60 + len(ranks) * (3 * lane + gap) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="DejaVu Sans, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="13">zero3, tiny GPT-2, one optimizer step (2 micro-steps) on '
           f'{len(ranks)} processes: computation, units gathered, all-gathers on the communication thread</text>']
    lanes = {0: 0, 2: 1, 1: 2}
    names = {0: "compute", 2: "gathered", 1: "comm"}
    for r, events in enumerate(ranks):
        y0 = 40 + r * (3 * lane + gap)
        for tid, k in lanes.items():
            y = y0 + k * lane
            out.append(f'<text x="10" y="{y + 17}">rank {r} {names[tid]}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{width - left - 20}" height="{lane - 2}" fill="#f4f4f4"/>')
        for e in sorted(events, key=lambda e: (e["name"] not in COLORS, e["ts"])):
            if e.get("tid") not in lanes or e["ts"] + e["dur"] < t0 or e["ts"] > t1:
                continue
            unit = unit_of(e["name"])
            if e["tid"] == 0 and e["name"] not in COLORS and not e["name"].startswith("wait all-gather "):
                continue
            a, b = max(e["ts"], t0), min(e["ts"] + e["dur"], t1)
            x, w = left + (a - t0) * scale, max((b - a) * scale, 1.0)
            y = y0 + lanes[e["tid"]] * lane
            if e["name"].startswith("wait all-gather "):
                fill, y, h = "#222222", y + lane - 9, 7  # a thin black bar under the compute spans
            else:
                fill, h = COLORS.get(e["name"], UNIT_COLORS.get(unit, "#bab0ac")), lane - 2
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{fill}" '
                       'stroke="white" stroke-width="0.5"><title>'
                       f'{e["name"]} {e["dur"] / 1000:.2f} ms</title></rect>')
            label = unit if unit and e["tid"] != 0 else (e["name"] if e["name"] in COLORS else "")
            if label and w > 7 * len(label):
                out.append(f'<text x="{x + 3:.1f}" y="{y + 16}" fill="white">{label}</text>')
    # Time axis and legend.
    ya = 40 + len(ranks) * (3 * lane + gap)
    ms = (t1 - t0) / 1000
    tick = 1 if ms < 15 else 5 if ms < 60 else 20
    t = 0
    while t <= ms:
        x = left + t * 1000 * scale
        out.append(f'<line x1="{x:.1f}" y1="{ya - 6}" x2="{x:.1f}" y2="{ya}" stroke="black"/>')
        out.append(f'<text x="{x - 8:.1f}" y="{ya + 12}">{t} ms</text>')
        t += tick
    legend = list(COLORS.items()) + [(f"unit {u}", c) for u, c in UNIT_COLORS.items()] + \
        [("waiting for an all-gather", "#222222")]
    x = left
    for name, c in legend:
        out.append(f'<rect x="{x}" y="{ya + 20}" width="10" height="10" fill="{c}"/>')
        out.append(f'<text x="{x + 14}" y="{ya + 29}">{name}</text>')
        x += 20 + 7 * len(name)
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
