"""The GPU checklist's figures, from what its phases wrote: tables in Markdown.

    python3 figures.py SUMMARIES_DIR

SUMMARIES_DIR holds each session's summary (NAME.json) and, for the measure-* and record-* sessions, its recording
exported as JSON (NAME.records.json, `golow export --format json`), which holds what a summary folds away: each
kernel, each copy, each NVML reading. A missing file, field or reading prints as '-' or 'none recorded': the report
must come back even from a run that went wrong. Python 3's standard library only, as on any GPU machine.
"""

import glob
import json
import math
import os
import statistics
import sys

RECORDS = ".records.json"
RECORDED_SESSIONS = ("measure-", "record-")
TOP_KERNELS = 8
# The collector names a generic elementwise kernel by its functor too, e.g.
# `at::native::vectorized_elementwise_kernel (clamp_scalar)`, so ReLU shows under any of these words.
RELU_WORDS = ("relu", "clamp", "threshold", "activation")
GRIDS_SHOWN = 8
# The levels' losses at a step agree when within this relative difference.
AGREE = 0.01


def num(value):
    """A finite number, else None: a file written by a failing run may hold anything."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def obj(value):
    return value if isinstance(value, dict) else {}


def items(value):
    return value if isinstance(value, list) else []


def number(value, digits=2):
    value = num(value)
    return "-" if value is None else f"{value:.{digits}f}"


def mib(value):
    value = num(value)
    return "-" if value is None else f"{value / 2**20:.0f}"


def text(value):
    """A table cell: worker names and CUPTI's or NVML's words may hold a '|' or a line break."""
    if value is None or value == "":
        return "-"
    return str(value).replace("|", "\\|").replace("\n", " ")


def code(name):
    # A code span keeps a kernel's template arguments (`<float>`) from reading as HTML.
    return "`" + text(name).replace("`", "'") + "`"


def dims(value):
    """A grid or block as (x, y, z), or None."""
    if isinstance(value, list) and len(value) == 3 and all(num(v) is not None for v in value):
        return tuple(int(v) for v in value)
    return None


def shape(value):
    return "-" if value is None else "(" + ",".join(str(v) for v in value) + ")"


def mean_max(values, digits):
    if not values:
        return None
    return f"{statistics.fmean(values):.{digits}f} / {max(values):.{digits}f}"


def measured(summaries):
    print("\n## Figures: measurements\n")
    print("| session | impl | status | ms/sample p50 | samples/s | peak GPU MiB | SM % | launches/step "
          "| H2D bytes/step (worker / CUPTI) | H2D ms p50 | busy/copy/idle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, summary in summaries:
        if not name.startswith("measure-"):
            continue
        for w in map(obj, items(obj(summary).get("workers"))):
            breakdown = obj(w.get("gpu_breakdown"))
            shares = "/".join(number(breakdown.get(k), 2) for k in ("busy", "copy", "idle")) if breakdown else "-"
            print(f"| {name} | {text(w.get('impl'))} | {text(w.get('status'))} "
                  f"| {number(obj(w.get('sample_time_ms')).get('p50'), 3)} "
                  f"| {number(w.get('throughput_samples_per_s'), 1)} | {mib(w.get('peak_gpu_mem_bytes'))} "
                  f"| {number(w.get('gpu_sm_percent_mean'), 1)} | {number(w.get('kernel_launches_per_step'), 1)} "
                  f"| {number(w.get('h2d_bytes_per_step'), 0)} / {number(w.get('cupti_h2d_bytes_per_step'), 0)} "
                  f"| {number(obj(w.get('h2d_ms')).get('p50'), 3)} | {shares} |")


def spread(values, digits):
    """Median (min–max) of the finite values, or '-'."""
    values = [v for v in values if num(v) is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def overhead(summaries):
    """The collector's alternating pairs: the ratio of each pair, and each side's throughput and sample time."""
    sides = {"cupti": {}, "nocupti": {}}
    for name, summary in summaries:
        parts = name.split("-", 2)
        if len(parts) != 3 or parts[0] != "overhead" or parts[2] not in sides:
            continue
        workers = items(obj(summary).get("workers"))
        if workers and num(obj(workers[0]).get("throughput_samples_per_s")):
            sides[parts[2]][parts[1]] = obj(workers[0])
    with_cupti, without = sides["cupti"], sides["nocupti"]
    pairs = sorted(r for r in with_cupti if r in without)
    ratios = [with_cupti[r]["throughput_samples_per_s"] / without[r]["throughput_samples_per_s"] for r in pairs]
    print("\n## Figures: the collector's overhead\n")
    if not ratios:
        print("No pair of runs finished.")
        return
    print(f"libtorch throughput with the collector / without, {len(ratios)} alternating pairs: median "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}–{max(ratios):.3f}; target ≥ 0.97); "
          f"each pair: {', '.join(f'{r:.3f}' for r in ratios)}.\n")
    print("| side | sessions | samples/s median (min–max) | ms/sample p50 median (min–max) "
          "| ms/sample p90 median (min–max) |")
    print("| --- | --- | --- | --- | --- |")
    for side, label in (("cupti", "with the collector"), ("nocupti", "--no-cupti")):
        runs = [sides[side][r] for r in pairs]
        print(f"| {label} | {len(runs)} | {spread([w.get('throughput_samples_per_s') for w in runs], 1)} "
              f"| {spread([obj(w.get('sample_time_ms')).get('p50') for w in runs], 3)} "
              f"| {spread([obj(w.get('sample_time_ms')).get('p90') for w in runs], 3)} |")


def repeated(summaries):
    """Sessions run several times over (golow run --repeat: NAME-1 … NAME-N), by NAME, in order."""
    groups = {}
    for name, summary in summaries:
        base, _, run = name.rpartition("-")
        if name.startswith("measure-") and run.isdigit() and base:
            groups.setdefault(base, []).append((int(run), summary))
    return {base: [s for _, s in sorted(runs, key=lambda r: r[0])] for base, runs in groups.items() if len(runs) > 1}


FIELDS = (
    ("samples/s", lambda w: w.get("throughput_samples_per_s"), 1),
    ("ms/sample p50", lambda w: obj(w.get("sample_time_ms")).get("p50"), 3),
    ("peak GPU MiB", lambda w: (num(w.get("peak_gpu_mem_bytes")) or math.nan) / 2**20, 0),
    ("launches/step", lambda w: w.get("kernel_launches_per_step"), 1),
    ("SM %", lambda w: w.get("gpu_sm_percent_mean"), 1),
)


def spreads(summaries):
    groups = repeated(summaries)
    if not groups:
        return
    print("\n## Figures: spreads across repeated sessions\n")
    print("Each figure as its median over the sessions (min–max); against libtorch: each session's ratio to its own "
          "libtorch, so that a slower or faster session moves both.\n")
    print("| sessions | impl | runs | " + " | ".join(f[0] for f in FIELDS) + " | samples/s / libtorch |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in FIELDS) + " | --- |")
    for base, runs in sorted(groups.items()):
        per_impl = {}
        for summary in runs:
            workers = {w.get("impl"): w for w in map(obj, items(obj(summary).get("workers")))}
            reference = num(obj(workers.get("libtorch")).get("throughput_samples_per_s"))
            for impl, w in workers.items():
                ratio = num(w.get("throughput_samples_per_s"))
                per_impl.setdefault(impl, []).append((w, ratio / reference if ratio and reference else None))
        for impl, seen in per_impl.items():
            cells = [spread([num(get(w)) for w, _ in seen], digits) for _, get, digits in FIELDS]
            print(f"| {base} | {text(impl)} | {len(seen)} | {' | '.join(cells)} "
                  f"| {spread([r for _, r in seen], 3)} |")


def scripts(summaries):
    """The --cmd workers: their steps, losses and where a typical step's time goes."""
    rows = [(name, w) for name, summary in summaries for w in map(obj, items(obj(summary).get("workers")))
            if isinstance(w.get("script"), dict)]
    if not rows:
        return
    print("\n## Figures: your own scripts (--cmd)\n")
    print("| session | worker | status | steps | loss first / last | step ms p50 | data / forward / backward / "
          "optimizer / other ms p50 | launches/step | H2D bytes/step (CUPTI) | peak GPU MiB | notice |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, w in rows:
        phases = obj(obj(w["script"]).get("phases"))
        shares = " / ".join(number(obj(phases.get(p)).get("p50_ms"), 2)
                            for p in ("data", "forward", "backward", "optimizer", "other")) if phases else "-"
        loss = obj(w.get("loss"))
        print(f"| {name} | {text(w.get('impl'))} | {text(w.get('status'))} | {text(w.get('steps'))} "
              f"| {number(loss.get('first'), 4)} / {number(loss.get('last'), 4)} "
              f"| {number(obj(w.get('step_time_ms')).get('p50'), 2)} | {shares} "
              f"| {number(w.get('kernel_launches_per_step'), 1)} | {number(w.get('cupti_h2d_bytes_per_step'), 0)} "
              f"| {mib(w.get('peak_gpu_mem_bytes'))} | {text(w.get('notice'))} |")


class Session:
    """A recorded session: its records, and the workers its summary or its records name, in that order."""

    def __init__(self, name, summary, records):
        self.name = name
        self.records = records
        self.summaries = {}
        for w in map(obj, items(obj(summary).get("workers"))):
            self.summaries.setdefault(w.get("impl"), w)
        names = list(self.summaries) + [r.get("worker") for r in records]
        self.workers = list(dict.fromkeys(n for n in names if isinstance(n, str)))
        start = next((r for r in records if r.get("type") == "session_start"), {})
        self.device = start.get("device", obj(obj(summary).get("config")).get("device"))

    def of(self, kind):
        return [r for r in self.records if r.get("type") == kind]

    def reason(self, kind):
        """Why NVML gave no readings of a kind, in its own words, or None."""
        return next((r["reason"] for r in self.of(kind) if isinstance(r.get("reason"), str)), None)

    def no_kernels(self, worker):
        status = next((r for r in self.of("collector") if r.get("worker") == worker), None)
        if status is not None and status.get("active") is False:
            return f"none recorded (collector inactive: {text(status.get('detail'))})"
        if self.device == "cpu":
            return "none recorded (a CPU run)"
        return "none recorded"


def kernel_totals(session):
    """Per worker, each kernel's launches, GPU time and grids over every window of the session. Its shape is that
    of the window in which it ran most often, as golow's kernel table takes it."""
    workers = {}
    for r in session.of("kernels"):
        if not isinstance(r.get("worker"), str):
            continue
        totals = workers.setdefault(r["worker"], {})
        for k in map(obj, items(r.get("kernels"))):
            if not isinstance(k.get("name"), str):
                continue
            t = totals.setdefault(k["name"], {"count": 0, "ns": 0, "most": 0, "grid": None, "block": None, "grids": {}})
            count = num(k.get("count")) or 0
            t["count"] += count
            t["ns"] += num(k.get("total_ns")) or 0
            if count > t["most"]:
                t["most"], t["grid"], t["block"] = count, dims(k.get("grid")), dims(k.get("block"))
            for entry in items(k.get("grid_histogram")):
                grid, launches = (dims(entry[0]), num(entry[1])) if len(items(entry)) == 2 else (None, None)
                if grid is not None and launches:
                    t["grids"][grid] = t["grids"].get(grid, 0) + launches
    return workers


def worker_kernels(sessions):
    """Each session's workers with their kernel totals (None without kernel records)."""
    for s in sessions:
        totals = kernel_totals(s)
        for worker in s.workers:
            yield s, worker, totals.get(worker)


def top_kernels(sessions):
    print("\n## Figures: top kernels by GPU time\n")
    print(f"The {TOP_KERNELS} kernels with the most GPU time in each worker over the whole session (every CUPTI "
          "window, start-up and warm-up included); share: of the worker's kernel time; grid and block: the "
          "kernel's most frequent launch shape.\n")
    print("| session | impl | kernel | launches | total ms | share | grid | block |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s, worker, kernels in worker_kernels(sessions):
        if not kernels:
            print(f"| {s.name} | {text(worker)} | {s.no_kernels(worker)} | - | - | - | - | - |")
            continue
        all_ns = sum(k["ns"] for k in kernels.values())
        ranked = sorted(kernels.items(), key=lambda kv: (-kv[1]["ns"], kv[0]))[:TOP_KERNELS]
        for name, k in ranked:
            share = f"{100 * k['ns'] / all_ns:.1f}%" if all_ns else "-"
            print(f"| {s.name} | {text(worker)} | {code(name)} | {k['count']:.0f} | {k['ns'] / 1e6:.3f} "
                  f"| {share} | {shape(k['grid'])} | {shape(k['block'])} |")


def relu_grids(sessions):
    print("\n## Figures: elementwise ReLU launch grids\n")
    print(f"Kernels whose name holds {', '.join(RELU_WORDS)}, with their launch grids merged over the session, "
          "most frequent first (the seed paper: PyTorch launches ReLU with grid (1024,2,1), and (512,2,1) at "
          "another level). The collector counts at most 16 grids per kernel and window.\n")
    print("| session | impl | kernel | launches | grids (launches) |")
    print("| --- | --- | --- | --- | --- |")
    for s, worker, kernels in worker_kernels(sessions):
        if not kernels:
            print(f"| {s.name} | {text(worker)} | {s.no_kernels(worker)} | - | - |")
            continue
        relu = [(name, k) for name, k in kernels.items() if any(w in name.lower() for w in RELU_WORDS)]
        if not relu:
            print(f"| {s.name} | {text(worker)} | none recorded | - | - |")
        for name, k in sorted(relu, key=lambda nk: (-nk[1]["count"], nk[0])):
            grids = sorted(k["grids"].items(), key=lambda gc: (-gc[1], gc[0]))
            shown = ", ".join(f"{shape(g)} × {c:.0f}" for g, c in grids[:GRIDS_SHOWN])
            if len(grids) > GRIDS_SHOWN:
                shown += f", {len(grids) - GRIDS_SHOWN} more"
            print(f"| {s.name} | {text(worker)} | {code(name)} | {k['count']:.0f} | {shown or '-'} |")


def h2d_by_source(session):
    """Per worker: the host-to-device bytes and nanoseconds CUPTI saw over the whole session, by source memory."""
    copies = {}
    for r in session.records:
        worker = r.get("worker")
        if not isinstance(worker, str) or r.get("type") != "kernels":
            continue
        by_source = copies.setdefault(worker, {})
        for c in map(obj, items(r.get("copies"))):
            if c.get("kind") != "host_to_device":
                continue
            t = by_source.setdefault(c.get("src") if c.get("src") in ("pageable", "pinned") else "other", [0, 0])
            t[0] += num(c.get("bytes")) or 0
            t[1] += num(c.get("total_ns")) or 0
    return copies


def h2d(sessions):
    print("\n## Figures: host-to-device copies per step (CUPTI)\n")
    print("CUPTI's host-to-device bytes per measured step, its records placed on the steps whose spans hold them "
          "(golow's summary, `cupti_h2d_bytes_per_step`), beside the bytes the worker says it copies a step; what lay "
          "outside the measured steps apart (start-up: the weights' upload; evaluation passes); and the session's "
          "copies by source memory. The seed paper claims PyTorch copies 2×: compare CUPTI / worker, and the "
          "implementations' bytes.\n")
    print("| session | impl | CUPTI bytes/step | worker bytes/step | CUPTI / worker | start-up bytes | evaluation bytes "
          "| pageable bytes, ms (session) | pinned bytes, ms (session) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in sessions:
        by_worker = h2d_by_source(s)
        for worker in s.workers:
            summary = obj(s.summaries.get(worker))
            reported = num(summary.get("h2d_bytes_per_step"))
            cupti = num(summary.get("cupti_h2d_bytes_per_step"))
            outside = obj(summary.get("cupti_outside_steps"))
            ratio = number(cupti / reported, 3) if cupti is not None and reported else "-"
            placed = "none recorded" if worker not in by_worker and cupti is None else number(cupti, 0)
            sources = []
            for source in ("pageable", "pinned"):
                total_bytes, total_ns = by_worker.get(worker, {}).get(source, (None, None))
                sources.append(f"{number(total_bytes, 0)}, "
                               f"{number(total_ns / 1e6 if total_ns is not None else None, 1)}")
            print(f"| {s.name} | {text(worker)} | {placed} | {number(reported, 0)} | {ratio} "
                  f"| {number(num(obj(outside.get('start_up')).get('h2d_bytes')), 0)} "
                  f"| {number(num(obj(outside.get('evaluation')).get('h2d_bytes')), 0)} | {' | '.join(sources)} |")


def nvml(sessions):
    print("\n## Figures: NVML readings\n")
    print("Per worker, from NVML's per-process readings.\n")
    print("| session | impl | readings | GPU memory MiB mean / max | SM % mean / max |")
    print("| --- | --- | --- | --- | --- |")
    for s in sessions:
        for worker in s.workers:
            readings = [r for r in s.of("gpu_process") if r.get("worker") == worker]
            memory = [v / 2**20 for v in (num(r.get("memory_bytes")) for r in readings) if v is not None]
            sm = [v for v in (num(r.get("sm_percent")) for r in readings) if v is not None]
            print(f"| {s.name} | {text(worker)} | {len(readings)} | {mean_max(memory, 0) or 'none recorded'} "
                  f"| {mean_max(sm, 1) or 'none recorded'} |")
    print("\nPer GPU, over the whole session: NVML's device utilisation and PCIe traffic (rx: into the GPU).\n")
    print("| session | GPU | utilisation % mean | PCIe rx MB/s mean | PCIe tx MB/s mean |")
    print("| --- | --- | --- | --- | --- |")
    for s in sessions:
        readings = {}
        for r in s.of("gpu_device") + s.of("gpu_pcie"):
            per_gpu = readings.setdefault(text(num(r.get("index"))), {})
            for field in ("utilization_percent", "rx_bytes_per_s", "tx_bytes_per_s"):
                if num(r.get(field)) is not None:
                    per_gpu.setdefault(field, []).append(r[field])
        if not readings:
            print(f"| {s.name} | - | none recorded | none recorded | none recorded |")
        for index, per_gpu in sorted(readings.items()):
            util, rx, tx = (per_gpu.get(f) for f in ("utilization_percent", "rx_bytes_per_s", "tx_bytes_per_s"))
            print(f"| {s.name} | {index} | {number(statistics.fmean(util), 1) if util else 'none recorded'} "
                  f"| {number(statistics.fmean(rx) / 1e6, 1) if rx else 'none recorded'} "
                  f"| {number(statistics.fmean(tx) / 1e6, 1) if tx else 'none recorded'} |")
    # NVML says once per session why it has nothing: per process inside a PID namespace, say, where it reports
    # the host's process IDs.
    for s in sessions:
        for kind, what in (("gpu_unavailable", "NVML"), ("gpu_processes_unavailable", "NVML per process")):
            if s.reason(kind) is not None:
                print(f"\n{s.name}: {what} unavailable: {text(s.reason(kind))}")


def step_losses(session):
    """Per worker, each step's loss by step number (a step's first report)."""
    losses = {}
    for r in session.of("step"):
        worker, step, loss = r.get("worker"), num(r.get("step")), num(r.get("loss"))
        if isinstance(worker, str) and step is not None and loss is not None:
            losses.setdefault(worker, {}).setdefault(int(step), loss)
    return losses


def relative(value, reference):
    return abs(value - reference) / max(abs(reference), 1e-12)


def loss_agreement(sessions):
    """Each level's loss at each step against the reference level's (libtorch where it ran) in the same session: the
    largest relative difference and the first step beyond AGREE; and, for sessions run several times over, how far a
    level's loss at a step moves from one run to the next (nonzero: its kernels are not deterministic)."""
    compared = [(s, step_losses(s)) for s in sessions]
    compared = [(s, losses) for s, losses in compared if len(losses) > 1]
    if not compared:
        return
    print("\n## Figures: the levels' losses step by step\n")
    print(f"Each level's loss at every step both ran, against the reference level's in the same session (same "
          f"weights, same batches); agreement: within {AGREE:.0%} relative at every step.\n")
    print("| session | impl | against | steps | largest difference (step) | first step beyond "
          f"{AGREE:.0%} | last step: loss / reference |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    verdicts = []
    for s, losses in compared:
        reference = "libtorch" if "libtorch" in losses else next(iter(losses))
        parted = []
        for worker, by_step in losses.items():
            if worker == reference:
                continue
            steps = sorted(set(by_step) & set(losses[reference]))
            if not steps:
                print(f"| {s.name} | {text(worker)} | {text(reference)} | 0 | - | - | - |")
                continue
            gaps = [(relative(by_step[k], losses[reference][k]), k) for k in steps]
            largest, at = max(gaps)
            beyond = next((k for gap, k in gaps if gap > AGREE), None)
            if beyond is not None:
                parted.append(f"{worker} at step {beyond}")
            last = steps[-1]
            print(f"| {s.name} | {text(worker)} | {text(reference)} | {len(steps)} | {largest:.2%} ({at}) "
                  f"| {'-' if beyond is None else beyond} | {by_step[last]:.4f} / {losses[reference][last]:.4f} |")
        verdicts.append(f"- {s.name}: " + (f"every level within {AGREE:.0%} of {reference} at every step"
                                           if not parted else f"parts from {reference}: {', '.join(parted)}"))
    print("\n" + "\n".join(verdicts))
    run_to_run(compared)


def run_to_run(compared):
    groups = {}
    for s, losses in compared:
        base, _, run = s.name.rpartition("-")
        if run.isdigit() and base:
            groups.setdefault(base, []).append(losses)
    groups = {base: runs for base, runs in groups.items() if len(runs) > 1}
    if not groups:
        return
    print("\nThe same level from one session to the next (same weights, batches and settings): a loss that moves "
          "between runs comes from kernels that are not deterministic (cuDNN's benchmark may pick another algorithm "
          "in each run, or one that accumulates with atomics).\n")
    print("| sessions | impl | runs | steps | largest run-to-run difference (step) | the same in every run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for base, runs in sorted(groups.items()):
        for worker in dict.fromkeys(w for losses in runs for w in losses):
            seen = [losses[worker] for losses in runs if worker in losses]
            steps = sorted(set.intersection(*(set(by_step) for by_step in seen)))
            if len(seen) < 2 or not steps:
                continue
            moves = [(relative(max(b[k] for b in seen), min(b[k] for b in seen)), k) for k in steps]
            largest, at = max(moves)
            print(f"| {base} | {text(worker)} | {len(seen)} | {len(steps)} | {largest:.2%} ({at}) "
                  f"| {'yes' if largest == 0 else 'no'} |")


def load(path):
    """The JSON at `path`, and why it could not be read (None when it could)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except (OSError, ValueError, RecursionError) as e:
        return None, f"{type(e).__name__}: {e}"


def recorded(folder, summaries, unreadable):
    """The measure-* and record-* sessions whose recording was exported beside the summaries."""
    summary_of = dict(summaries)
    names = [n for n, _ in summaries] + [os.path.basename(p)[: -len(RECORDS)]
                                         for p in glob.glob(os.path.join(folder, "*" + RECORDS))]
    sessions, missing = [], []
    for name in sorted(set(n for n in names if n.startswith(RECORDED_SESSIONS))):
        path = os.path.join(folder, name + RECORDS)
        if not os.path.exists(path):
            missing.append(name)
            continue
        export, error = load(path)
        if error:
            unreadable.append((name + RECORDS, error))
            continue
        records = [r for r in items(obj(export).get("records")) if isinstance(r, dict)]
        sessions.append(Session(name, summary_of.get(name), records))
    return sessions, missing


def main():
    folder = sys.argv[1]
    summaries, unreadable = [], []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        base = os.path.basename(path)
        if base.endswith(RECORDS):
            continue
        summary, error = load(path)
        if error:
            unreadable.append((base, error))
        else:
            summaries.append((base[: -len(".json")], summary))
    measured(summaries)
    spreads(summaries)
    scripts(summaries)
    overhead(summaries)
    sessions, missing = recorded(folder, summaries, unreadable)
    if missing:
        print(f"\nNo records export (NAME{RECORDS}) for {', '.join(missing)}: no kernel, copy or NVML figures.")
    if sessions:
        loss_agreement(sessions)
        top_kernels(sessions)
        relu_grids(sessions)
        h2d(sessions)
        nvml(sessions)
    if unreadable:
        print("\n## Figures: files that could not be read\n")
        for base, error in unreadable:
            print(f"- {base}: {text(error)}")


if __name__ == "__main__":
    main()
