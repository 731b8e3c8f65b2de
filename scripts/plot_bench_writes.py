"""Chart of a write benchmark run: per workload, done/s and p99 latency against offered/s.

    .venv-bench/bin/python scripts/plot_bench_writes.py RESULTS [--before RESULTS] [--out chart.svg]

RESULTS is a results directory of `scripts/bench-writes` (its results.json) or such a
results.json itself: {"runs": [{"steps": [{"workload", "offered_per_s", "done_per_s",
"p99_ms", "status_5xx", ...}, ...]}, ...]}. With --before, a second run (the code before a
change) is drawn beside it, dashed. Steps that answered any 5xx are ringed in red. The
output's format follows its extension (.svg, .png, .pdf); the default is chart.svg in the
results directory. `scripts/bench-writes` calls this at the end of every run.
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

WORKLOADS = [
    ("creates", "business creates"),
    ("mixed", "mixed: creates, deletes,\nrestores, renames"),
    ("site-uploads", "uploads into one site"),
    ("business-uploads", "uploads into one business"),
]
# Before is drawn over after (open markers, dashed), so it shows where the two coincide.
AFTER = {"color": "#1f5fa8", "linestyle": "-", "marker": "o", "markerfacecolor": "#1f5fa8", "zorder": 2}
BEFORE = {"color": "#d9731a", "linestyle": "--", "marker": "s", "markerfacecolor": "white", "zorder": 3}


def load(path):
    """Steps by workload, each list ordered by offered rate, and the file's note if any."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    with open(path) as f:
        data = json.load(f)
    steps = {}
    for run in data.get("runs", []):
        for step in run.get("steps", []):
            steps.setdefault(step["workload"], []).append(step)
    for workload in steps:
        steps[workload].sort(key=lambda s: s["offered_per_s"])
    return steps, data.get("label")


def thousands(value, _position=None):
    return f"{value:,.0f}"


def draw(after, before, out, after_label, before_label, title):
    workloads = [w for w in WORKLOADS if w[0] in after or (before and w[0] in before)]
    if not workloads:
        sys.exit("plot_bench_writes: no steps to draw")
    fig, axes = plt.subplots(
        2, len(workloads), figsize=(3.4 * len(workloads) + 0.6, 6.6), squeeze=False, sharex="col"
    )
    # One latency scale for every workload, so their p99s compare at a glance.
    for ax in axes[1][1:]:
        ax.sharey(axes[1][0])
    for col, (workload, name) in enumerate(workloads):
        done_ax, p99_ax = axes[0][col], axes[1][col]
        runs = [(before, BEFORE), (after, AFTER)] if before else [(after, AFTER)]
        top = 0.0
        for steps_by_workload, style in runs:
            steps = (steps_by_workload or {}).get(workload, [])
            if not steps:
                continue
            offered = [s["offered_per_s"] for s in steps]
            top = max(top, max(offered))
            done_ax.plot(offered, [s["done_per_s"] for s in steps], markersize=5, linewidth=1.6, **style)
            p99_ax.plot(offered, [s["p99_ms"] for s in steps], markersize=5, linewidth=1.6, **style)
            failed = [s for s in steps if s.get("status_5xx")]
            for ax, field in ((done_ax, "done_per_s"), (p99_ax, "p99_ms")):
                ax.plot(
                    [s["offered_per_s"] for s in failed],
                    [s[field] for s in failed],
                    linestyle="none",
                    marker="o",
                    markersize=11,
                    markerfacecolor="none",
                    markeredgecolor="#c0392b",
                    markeredgewidth=1.4,
                    zorder=4,
                )
        # Every request offered done: the line a run keeps to while it keeps up.
        done_ax.plot([0, top], [0, top], color="#999999", linewidth=0.8, linestyle=":")
        done_ax.set_title(name, fontsize=10)
        done_ax.set_xlim(0, top * 1.05)
        done_ax.set_ylim(0, top * 1.05)
        p99_ax.set_yscale("log")
        p99_ax.yaxis.set_major_formatter(FuncFormatter(thousands))
        p99_ax.yaxis.set_minor_formatter(NullFormatter())
        for ax in (done_ax, p99_ax):
            ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
            ax.xaxis.set_major_formatter(FuncFormatter(thousands))
            ax.tick_params(labelsize=8)
        done_ax.yaxis.set_major_formatter(FuncFormatter(thousands))
        p99_ax.set_xlabel("offered (requests/s)", fontsize=9)
        if col == 0:
            done_ax.set_ylabel("done (2xx/s)", fontsize=9)
            p99_ax.set_ylabel("p99 latency (ms, log scale)", fontsize=9)
    handles = [Line2D([], [], markersize=5, linewidth=1.6, **AFTER)]
    labels = [after_label]
    if before:
        handles.insert(0, Line2D([], [], markersize=5, linewidth=1.6, **BEFORE))
        labels.insert(0, before_label)
    handles += [
        Line2D([], [], linestyle="none", marker="o", markersize=11, markerfacecolor="none",
               markeredgecolor="#c0392b", markeredgewidth=1.4),
        Line2D([], [], color="#999999", linewidth=0.8, linestyle=":"),
    ]
    labels += ["step with 5xx answers", "done = offered"]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    metadata = {"Date": None} if out.endswith(".svg") else None
    fig.savefig(out, metadata=metadata)
    print(f"plot_bench_writes: wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a bench-writes results directory or its results.json")
    parser.add_argument("--before", help="the run to compare with (directory or results.json)")
    parser.add_argument("--out", help="the chart to write (default: RESULTS/chart.svg)")
    parser.add_argument("--title", default="Write benchmark: one account's bursts of writes (modelled DynamoDB time)")
    args = parser.parse_args()
    after, after_label = load(args.results)
    before, before_label = load(args.before) if args.before else (None, None)
    out = args.out
    if not out:
        directory = args.results if os.path.isdir(args.results) else os.path.dirname(args.results)
        out = os.path.join(directory or ".", "chart.svg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG
    matplotlib.rcParams["svg.hashsalt"] = "bench-writes"  # the same input gives the same file
    draw(after, before, out, after_label or ("after" if before else "this run"),
         before_label or "before", args.title)


if __name__ == "__main__":
    main()
