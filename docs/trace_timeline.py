#!/usr/bin/env python3
"""Draws BRISK_TRACE files (Chrome trace JSON, one per rank) as a timeline PNG.

    python3 docs/trace_timeline.py OUT.png TRACE.rank0.json TRACE.rank1.json [--step K]

One row pair per rank: computation (tid 0: forward, backward, optimizer step, the reducer's
finalize, triangles where a gradient hook launched a bucket) above communication (tid 1: each
bucket's all-reduce while the communication thread worked on it). --step picks which training
step to draw (by its "forward" span; default: the last but one). Needs only the standard
library and ImageMagick's `convert` (Debian: apt-get install imagemagick): the script writes
Magick Vector Graphics and lets convert rasterise it with the DejaVu Sans font.
"""
import argparse
import json
import subprocess
import tempfile

COLORS = {
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "optimizer step": "#59a14f",
    "reducer finalize": "#bab0ac",
}
BUCKET_COLORS = ["#b07aa1", "#9c755f", "#e15759", "#76b7b2", "#edc948", "#ff9da7"]


def load(path):
    with open(path) as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]


def color(name):
    if name.startswith("all_reduce bucket "):
        return BUCKET_COLORS[int(name.split()[-1]) % len(BUCKET_COLORS)]
    return COLORS.get(name, "#cccccc")


def label(name):
    if name.startswith("all_reduce bucket "):
        return "bucket " + name.split()[-1]
    return {"reducer finalize": "wait", "optimizer step": "step"}.get(name, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--step", type=int, default=-2)
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--own-clocks", action="store_true",
                    help="align each rank at its own forward (traces from different hosts)")
    args = ap.parse_args()

    ranks = [load(p) for p in args.traces]
    # The window: from the chosen step's first forward to the end of its last optimizer step.
    # Ranks on one host share the clock (CLOCK_MONOTONIC), so they are drawn on one time axis.
    windows = []
    for events in ranks:
        fwd = sorted((e for e in events if e["name"] == "forward"), key=lambda e: e["ts"])
        steps = sorted((e for e in events if e["name"] == "optimizer step"), key=lambda e: e["ts"])
        f = fwd[args.step]
        s = next(e for e in steps if e["ts"] >= f["ts"])
        windows.append((f["ts"], s["ts"] + s["dur"]))
    if not args.own_clocks:
        windows = [(min(a for a, _ in windows), max(b for _, b in windows))] * len(windows)
    span = max(b - a for a, b in windows)

    left, right, top, lane_h, gap = 150, 30, 50, 34, 26
    width = args.width
    scale = (width - left - right) / span
    height = top + len(ranks) * (2 * lane_h + gap) + 40
    mvg = [
        f"viewbox 0 0 {width} {height}",
        "fill white",
        f"rectangle 0,0 {width},{height}",
        "font DejaVu-Sans",
        "font-size 15",
        "fill black",
        f"text 10,24 'One training step on {len(ranks)} processes: computation (upper lane), bucket all-reduces "
        "(lower lane); triangles: bucket launches'",
        "font-size 12",
    ]
    for r, (events, (t0, t1)) in enumerate(zip(ranks, windows)):
        y = top + r * (2 * lane_h + gap)
        mvg += ["fill black", f"text 10,{y + 22} 'rank {r} compute'", f"text 10,{y + lane_h + 22} 'rank {r} comm'"]
        mvg += ["fill #f4f4f4", f"rectangle {left},{y} {width - right},{y + 2 * lane_h}"]
        backward_end = None
        for e in sorted(events, key=lambda e: e["ts"]):
            if e["ts"] + e.get("dur", 0) < t0 or e["ts"] > t1:
                continue
            if e["ph"] == "i":
                if e["name"].startswith("launch bucket "):
                    # A launch: a small triangle on the compute lane's lower edge, in the
                    # bucket's colour, pointing down at the communication lane.
                    x = left + (e["ts"] - t0) * scale
                    yb = y + lane_h
                    mvg += [f"fill {color('all_reduce bucket ' + e['name'].split()[-1])}", "stroke black",
                            "stroke-width 0.8", f"polygon {x - 6:.1f},{yb - 11} {x + 6:.1f},{yb - 11} {x:.1f},{yb}",
                            "stroke none"]
                continue
            if e["name"] == "reducer finalize" and backward_end is None:
                backward_end = e["ts"]
            x0 = left + (max(e["ts"], t0) - t0) * scale
            x1 = left + (min(e["ts"] + e["dur"], t1) - t0) * scale
            x1 = max(x1, x0 + 2)
            ly = y + (lane_h if e["tid"] == 1 else 0)
            mvg += [f"fill {color(e['name'])}", "stroke white", "stroke-width 1",
                    f"rectangle {x0:.1f},{ly + 3} {x1:.1f},{ly + lane_h - 3}", "stroke none"]
            text = label(e["name"])
            if x1 - x0 > 7.2 * len(text):
                mvg += ["fill white", f"text {x0 + 4:.1f},{ly + lane_h / 2 + 4} '{text}'"]
        if backward_end is not None:
            xb = left + (backward_end - t0) * scale
            mvg += ["stroke black", "stroke-width 1.5", "stroke-dasharray 4 3",
                    f"line {xb:.1f},{y - 4} {xb:.1f},{y + 2 * lane_h + 4}", "stroke none", "stroke-dasharray none",
                    "fill black", f"text {xb + 4:.1f},{y - 6} 'backward ends'"]
    # Time axis (ms from the step's start).
    ay = height - 30
    mvg += ["stroke #444444", "stroke-width 1", f"line {left},{ay} {width - right},{ay}", "stroke none", "fill #444444"]
    total_ms = span / 1000.0
    tick = next(t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if total_ms / t <= 12)
    k = 0
    while k * tick <= total_ms + 1e-9:
        x = left + k * tick * 1000 * scale
        mvg += ["stroke #444444", f"line {x:.1f},{ay} {x:.1f},{ay + 5}", "stroke none",
                f"text {x - 8:.1f},{ay + 18} '{k * tick:g}'"]
        k += 1
    mvg += [f"text 10,{ay + 18} 'time (ms)'"]

    with tempfile.NamedTemporaryFile("w", suffix=".mvg", delete=False) as f:
        f.write("\n".join(mvg) + "\n")
        mvg_path = f.name
    subprocess.run(["convert", "-size", f"{width}x{height}", f"mvg:{mvg_path}", "-strip",
                    "+dither", "-colors", "64", args.out], check=True)
    print(f"wrote {args.out} ({width}x{height})")


if __name__ == "__main__":
    main()
