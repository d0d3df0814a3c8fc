#!/usr/bin/env python3
"""Draws a restarted job's BRISK_TRACE files as an SVG timeline: the attempt that failed, the kill,
the restart, the load of the newest complete checkpoint, the steps that followed and every save,
with the background writes (async_save) on their own lane.

    python3 docs/restart_trace_svg.py OUT.svg TRACE.rank0.json TRACE.rank1.json \\
        TRACE.restart1.rank0.json TRACE.restart1.rank1.json [--log restarted.log] [--title TEXT]

Under `brisk launch --max-restarts` each attempt writes its own files (<path>.rank<r>.json on the
first, <path>.restart<k>.rank<r>.json on the k-th restart), all on the host's steady clock, so the
attempts line up on one time axis. Per rank two lanes: the training loop (tid 0: training steps,
save_state copying the state out, waits for a save, load_state) and the checkpoint writer (tid 9:
each file written and synced, the main process waiting for the other ranks' files, the manifest
and the publication). A second panel zooms on one save of the restarted attempt. --log takes the
launcher's lines (attempt failed, continues from) as captions. Standard library only.
"""
import argparse
import json
import re

LOOP, WRITER = 0, 9
COLORS = {
    "step": "#4e79a7",            # backward + optimizer step
    "save_state": "#e15759",      # the loop blocked: the state copied out
    "wait for checkpoint": "#222222",
    "load_state": "#b07aa1",
    "write": "#f28e2b",           # a file written and fsynced on the writer thread
    "wait for the other ranks' files": "#d3d3d3",
    "manifest and publish": "#59a14f",
}
LABELS = {
    "step": "training step (backward, optimizer step)",
    "save_state": "save_state: the loop copies the state out",
    "wait for checkpoint": "waiting for the previous save",
    "load_state": "load_state (the newest complete checkpoint)",
    "write": "background: a file written + fsynced + hashed",
    "wait for the other ranks' files": "background: main waits for the other ranks' files",
    "manifest and publish": "background: manifest, atomic rename, total_limit",
}


def kind(e):
    n = e["name"]
    if e.get("tid") == LOOP and n in ("backward", "optimizer step"):
        return "step"
    if e.get("tid") == WRITER and n.startswith("write "):
        return "write"
    return n if n in COLORS else None


def load(paths):
    """{(attempt, rank): [events]} from the file names."""
    runs = {}
    for p in paths:
        m = re.search(r"(?:\.restart(\d+))?\.rank(\d+)\.json$", p)
        if not m:
            raise SystemExit(f"{p}: expected <path>[.restart<k>].rank<r>.json")
        attempt, rank = int(m.group(1) or 0), int(m.group(2))
        with open(p) as f:
            runs[(attempt, rank)] = [e for e in json.load(f)["traceEvents"] if e.get("ph") in ("X", "i")]
    return runs


class Panel:
    def __init__(self, out, y, t0, t1, left=150, width=1100):
        self.out, self.y, self.t0, self.t1, self.left, self.width = out, y, t0, t1, left, width
        self.scale = (width - left - 20) / (t1 - t0)

    def x(self, t):
        return self.left + (t - self.t0) * self.scale

    def lanes(self, ranks, lane):
        for r in ranks:
            for k, name in enumerate(("loop", "writer")):
                y = self.y + (2 * r + k) * lane
                self.out.append(f'<text x="10" y="{y + 15}">rank {r} {name}</text>')
                self.out.append(f'<rect x="{self.left}" y="{y}" width="{self.width - self.left - 20}" '
                                f'height="{lane - 3}" fill="#f4f4f4"/>')

    def span(self, e, y, h, fill, attempt):
        a, b = max(e["ts"], self.t0), min(e["ts"] + e.get("dur", 0), self.t1)
        if b < a:
            return
        x, w = self.x(a), max((b - a) * self.scale, 1.0)
        self.out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{fill}"><title>'
                        f'attempt {attempt + 1}: {e["name"]} {e.get("dur", 0) / 1000:.2f} ms</title></rect>')

    def axis(self, y, unit_s):
        span_s = (self.t1 - self.t0) / 1e6
        steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20]
        tick = next(s for s in steps if span_s / s <= 12)
        t = 0.0
        while t <= span_s + 1e-9:
            x = self.x(self.t0 + t * 1e6)
            label = f"{t:g} s" if unit_s else f"{t * 1000:g} ms"
            self.out.append(f'<line x1="{x:.1f}" y1="{y - 5}" x2="{x:.1f}" y2="{y}" stroke="black"/>')
            self.out.append(f'<text x="{x - 10:.1f}" y="{y + 12}">{label}</text>')
            t += tick


def draw(panel, runs, ranks, lane):
    panel.lanes(ranks, lane)
    for (attempt, rank), events in sorted(runs.items()):
        for e in events:
            k = kind(e)
            if e["ph"] == "i" and e["name"].startswith("killed"):
                x = panel.x(e["ts"])
                if panel.left <= x <= panel.width:
                    y = panel.y + 2 * rank * lane
                    panel.out.append(f'<line x1="{x:.1f}" y1="{y - 4}" x2="{x:.1f}" y2="{y + 2 * lane}" '
                                     'stroke="#c00000" stroke-width="2"/>')
                    panel.out.append(f'<text x="{x + 4:.1f}" y="{y - 6}" fill="#c00000">SIGKILL '
                                     f'(rank {rank}, attempt {attempt + 1})</text>')
                continue
            if k is None or e["ph"] != "X":
                continue
            row = 2 * rank + (1 if e.get("tid") == WRITER else 0)
            y = panel.y + row * lane
            panel.span(e, y, lane - 3, COLORS[k], attempt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--log", help="the launch's output, for the launcher's lines")
    ap.add_argument("--title", default="A restart, as traced")
    args = ap.parse_args()
    runs = load(args.traces)
    ranks = sorted({r for _, r in runs})
    attempts = sorted({a for a, _ in runs})
    first = {a: min(e["ts"] for (aa, _), ev in runs.items() if aa == a for e in ev) for a in attempts}
    last = {a: max(e["ts"] + e.get("dur", 0) for (aa, _), ev in runs.items() if aa == a for e in ev)
            for a in attempts}
    t0, t1 = first[attempts[0]], last[attempts[-1]]
    pad = (t1 - t0) * 0.01
    lane, width = 22, 1100
    captions = []
    if args.log:
        with open(args.log, errors="replace") as f:
            for line in f.read().replace("\r", "\n").splitlines():
                if re.search(r"brisk launch: attempt|continues from|resumed from|BRISK_FAULT_KILL_AT_STEP", line):
                    captions.append(line.strip())
    block = 2 * len(ranks) * lane
    height = 60 + block + 50 + 30 + block + 50 + 18 * (len(LABELS) // 2 + 1) + 16 * len(captions) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="DejaVu Sans, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="13">{args.title}</text>']
    # Panel 1: the whole job, each attempt on a shaded band.
    top = Panel(out, 50, t0 - pad, t1 + pad)
    for a in attempts:
        x0, x1 = top.x(first[a]), top.x(last[a])
        out.append(f'<rect x="{x0:.1f}" y="{top.y - 14}" width="{x1 - x0:.1f}" height="{block + 14}" '
                   f'fill="{"#fff3e0" if a == 0 else "#e8f4ea"}"/>')
        label = "attempt 1" if a == 0 else f"attempt {a + 1} (BRISK_RESTART_COUNT={a})"
        lx = min(x0 + 3, width - 10 - 6.2 * len(label))
        out.append(f'<text x="{lx:.1f}" y="{top.y - 3}">{label}</text>')
    draw(top, runs, ranks, lane)
    loaded = [re.search(r"continues from \S*?(checkpoint_\d+)", c) for c in captions]
    loaded = [m.group(1) for m in loaded if m]
    for a in attempts[1:]:
        x0 = top.x(last[a - 1])
        out.append(f'<text x="{x0 + 3:.1f}" y="{top.y + block + 14}" fill="#555555">'
                   f'{(first[a] - last[a - 1]) / 1e6:.1f} s: every rank stopped, the job started again, '
                   'the data read</text>')
        loads = [e for e in runs.get((a, 0), []) if e["ph"] == "X" and e["name"] == "load_state"]
        if loads and len(loaded) >= a:
            x = top.x(loads[0]["ts"])
            out.append(f'<text x="{x - 4:.1f}" y="{top.y + block + 14}" text-anchor="end" fill="#b07aa1">'
                       f'load_state: {loaded[a - 1]}</text>')
    top.axis(top.y + block + 30, True)
    # Panel 2: one save of the last attempt (rank 0's save_state that has the longest background write).
    y2 = top.y + block + 80
    saves = [e for e in runs[(attempts[-1], 0)] if e["ph"] == "X" and e["name"] == "save_state"]
    writer = [e for e in runs[(attempts[-1], 0)] if e["ph"] == "X" and e.get("tid") == WRITER]
    zoom = None
    for s in saves:
        after = [w for w in writer if w["ts"] >= s["ts"]]
        pub = [w for w in after if w["name"] == "manifest and publish"]
        if pub:
            end = pub[0]["ts"] + pub[0]["dur"]
            if zoom is None or end - s["ts"] > zoom[1] - zoom[0]:
                zoom = (s["ts"], end)
    if zoom:
        w = zoom[1] - zoom[0]
        out.append(f'<text x="10" y="{y2 - 20}" font-size="12">One save of attempt {attempts[-1] + 1}, '
                   f'zoomed: the loop is blocked only while save_state copies the state out; the files are '
                   f'written in the background while it trains on</text>')
        zp = Panel(out, y2, zoom[0] - 0.25 * w, zoom[1] + 0.25 * w)
        draw(zp, {k: v for k, v in runs.items() if k[0] == attempts[-1]}, ranks, lane)
        zp.axis(y2 + block + 16, False)
    # Legend and the launcher's lines.
    y = y2 + block + 50
    for i, (k, text) in enumerate(LABELS.items()):
        x = 150 + (i % 2) * 470
        yy = y + (i // 2) * 18
        out.append(f'<rect x="{x}" y="{yy - 9}" width="10" height="10" fill="{COLORS[k]}"/>')
        out.append(f'<text x="{x + 14}" y="{yy}">{text}</text>')
    y += 18 * (len(LABELS) // 2 + 1)
    for line in captions:
        safe = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        out.append(f'<text x="10" y="{y}" font-family="DejaVu Sans Mono, monospace" font-size="10">{safe}</text>')
        y += 16
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
