"""The GPU checklist's figures, from the summaries its phases wrote: one table per phase, in Markdown.

    python3 figures.py SUMMARIES_DIR
"""

import glob
import json
import os
import statistics
import sys


def number(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def mib(value):
    return "-" if value is None else f"{value / 2**20:.0f}"


def measured(summaries):
    print("\n## Figures: measurements\n")
    print("| session | impl | status | ms/sample p50 | samples/s | peak GPU MiB | SM % | launches/step "
          "| H2D bytes/step (worker / CUPTI) | H2D ms p50 | busy/copy/idle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, summary in summaries:
        if not name.startswith("measure-"):
            continue
        for w in summary.get("workers", []):
            breakdown = w.get("gpu_breakdown") or {}
            shares = "/".join(number(breakdown.get(k), 2) for k in ("busy", "copy", "idle")) if breakdown else "-"
            h2d = (w.get("h2d_ms") or {}).get("p50")
            print(f"| {name} | {w.get('impl')} | {w.get('status')} "
                  f"| {number((w.get('sample_time_ms') or {}).get('p50'), 3)} "
                  f"| {number(w.get('throughput_samples_per_s'), 1)} | {mib(w.get('peak_gpu_mem_bytes'))} "
                  f"| {number(w.get('gpu_sm_percent_mean'), 1)} | {number(w.get('kernel_launches_per_step'), 1)} "
                  f"| {w.get('h2d_bytes_per_step', '-')} / {number(w.get('cupti_h2d_bytes_per_step'), 0)} "
                  f"| {number(h2d, 3)} | {shares} |")


def overhead(summaries):
    with_cupti, without = {}, {}
    for name, summary in summaries:
        if not name.startswith("overhead-"):
            continue
        _, round_, kind = name.split("-", 2)
        workers = summary.get("workers", [])
        if workers and workers[0].get("throughput_samples_per_s"):
            (with_cupti if kind == "cupti" else without)[round_] = workers[0]["throughput_samples_per_s"]
    ratios = [with_cupti[r] / without[r] for r in with_cupti if r in without]
    print("\n## Figures: the collector's overhead\n")
    if not ratios:
        print("No pair of runs finished.")
        return
    print(f"libtorch throughput with the collector / without, {len(ratios)} alternating pairs: median "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}–{max(ratios):.3f}; target ≥ 0.97)")


def main():
    folder = sys.argv[1]
    summaries = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            summaries.append((os.path.basename(path)[: -len(".json")], json.load(f)))
    measured(summaries)
    overhead(summaries)


if __name__ == "__main__":
    main()
