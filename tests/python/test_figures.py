"""Tests for the GPU checklist's figures (gpu/figures.py), run as gpu/run runs it: a subprocess on a folder of
summaries (NAME.json) and records exports (NAME.records.json), its Markdown on stdout.

Run from the repository root:
    .venv/bin/python -m unittest discover --start-directory tests/python --top-level-directory tests/python -v
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIGURES = os.path.join(ROOT, "gpu", "figures.py")
GOLOW = os.path.join(ROOT, "target", "release", "golow")
WORKER = os.path.join(ROOT, "target", "release", "golow-worker")

RELU = "at::native::vectorized_elementwise_kernel (clamp_scalar)"
MiB = 2**20


def figures(folder):
    done = subprocess.run([sys.executable, FIGURES, folder], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, f"figures.py failed ({done.returncode}):\n{done.stderr}"
    return done.stdout


def section(markdown, title):
    """The text under `## Figures: title`, up to the next section."""
    start = markdown.index(f"## Figures: {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start: end if end >= 0 else None]


def rows(markdown, title, session):
    """The cells of the section's table rows for `session`, the session's own column left out."""
    table = []
    for line in section(markdown, title).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and cells[0] == session:
            table.append(cells[1:])
    return table


def write(folder, name, value):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))


def record(t_ms, kind, worker=None, **fields):
    head = {"v": 1, "t_ms": t_ms} | ({"worker": worker} if worker else {})
    return head | {"type": kind} | fields


def kernel(name, count, total_ms, grid=(1, 1, 1), block=(32, 1, 1), histogram=None):
    return {"name": name, "count": count, "total_ns": int(total_ms * 1e6), "max_ns": 1, "grid": list(grid),
            "block": list(block), "shapes": 1, "registers_per_thread": 32, "shared_bytes": 0,
            "grid_histogram": [[list(g), n] for g, n in (histogram or [(grid, count)])]}


def copy(kind, src, count, size, total_ms):
    return {"kind": kind, "src": src, "count": count, "bytes": size, "total_ns": int(total_ms * 1e6)}


def window(t_ms, worker, kernels=(), copies=()):
    return record(t_ms, "kernels", worker, window_start_ns=0, window_end_ns=10**9, kernels=list(kernels),
                  copies=list(copies), breakdown={"busy": 0.5, "copy": 0.1, "idle": 0.4}, dropped_records=0)


def step(t_ms, worker, n):
    return record(t_ms, "step", worker, step=n, epoch=0, phase="train", batch_size=32, data_ms=1.0, h2d_ms=0.5,
                  h2d_bytes=350, compute_ms=10.0, loss=2.0, correct=3, warmup=n == 0)


def pytorch_records():
    """pytorch: a start-up window (the weights' upload), a first window after step 0 (left out of the per-step
    copies, as the summary leaves it out), then two windows over steps 1-4."""
    w = "pytorch"
    return [
        record(1, "worker_started", w, pid=10, command=["golow-worker"]),
        record(2, "collector", w, active=True, detail="CUPTI 13"),
        window(100, w, copies=[copy("host_to_device", "pageable", 200, 100_000_000, 50)]),
        step(200, w, 0),
        window(300, w, kernels=[
            kernel("gemm", 10, 30, grid=(32, 1, 1), block=(256, 1, 1)),
            kernel(RELU, 5, 5, grid=(1024, 2, 1), block=(128, 1, 1),
                   histogram=[((1024, 2, 1), 3), ((512, 2, 1), 2)]),
        ], copies=[copy("host_to_device", "pageable", 1, 1000, 1)]),
        step(400, w, 1),
        step(500, w, 2),
        window(600, w, kernels=[
            kernel("gemm", 20, 60, grid=(64, 2, 1), block=(128, 1, 1)),
            kernel("cudnn::bn_fw_tr_1C11_kernel_NCHW", 4, 19),
            kernel(RELU, 6, 6, grid=(512, 2, 1), block=(128, 1, 1),
                   histogram=[((512, 2, 1), 4), ((1024, 2, 1), 2)]),
        ], copies=[
            copy("host_to_device", "pageable", 2, 1200, 1),
            copy("host_to_device", "pinned", 1, 400, 0.2),
            copy("device_to_host", "pageable", 1, 999, 3),
        ]),
        step(700, w, 3),
        step(800, w, 4),
        window(900, w, kernels=[kernel("gemm", 10, 30, grid=(32, 1, 1), block=(256, 1, 1))],
               copies=[copy("host_to_device", "pageable", 2, 1200, 1)]),
        record(910, "gpu_process", w, pid=10, index=0, memory_bytes=1024 * MiB, sm_percent=50, last_seen_us=1),
        record(920, "gpu_process", w, pid=10, index=0, memory_bytes=3072 * MiB, sm_percent=70, last_seen_us=2),
    ]


def libtorch_records():
    """libtorch: ten kernels of 1 to 10 ms, no ReLU among them; pinned copies only; NVML memory without SM %."""
    w = "libtorch"
    return [
        record(1, "worker_started", w, pid=11, command=["golow-worker"]),
        step(200, w, 0),
        window(300, w, kernels=[kernel(f"k{i}", 1, i + 1) for i in range(10)]),
        step(400, w, 1),
        step(500, w, 2),
        window(600, w, copies=[copy("host_to_device", "pinned", 2, 700, 0.1)]),
        record(910, "gpu_process", w, pid=11, index=0, memory_bytes=512 * MiB, sm_percent=None, last_seen_us=None),
    ]


def summary(*workers):
    """Each worker as (name, the bytes it says it copies a step[, CUPTI's bytes per placed step, the start-up's])."""
    def worker(name, h2d, cupti=None, start_up=None):
        return {"impl": name, "status": "ok", "h2d_bytes_per_step": h2d, "cupti_h2d_bytes_per_step": cupti,
                "cupti_outside_steps": None if start_up is None else {"start_up": {"h2d_bytes": start_up}}}
    return {"golow_summary": 1, "config": {"device": "cuda"}, "workers": [worker(*w) for w in workers]}


class FiguresTest(unittest.TestCase):
    """Constructed records: these tests check the report's arithmetic and wording, not what a GPU records."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        folder = cls.folder.name
        records = sorted(pytorch_records() + libtorch_records(), key=lambda r: r["t_ms"])
        records += [
            record(950, "gpu_device", index=0, utilization_percent=80, memory_used_bytes=1, power_watts=1.0,
                   sm_clock_mhz=1),
            record(960, "gpu_device", index=0, utilization_percent=90, memory_used_bytes=1, power_watts=1.0,
                   sm_clock_mhz=1),
            record(970, "gpu_device", index=0, utilization_percent=None, memory_used_bytes=None, power_watts=None,
                   sm_clock_mhz=None),
            record(980, "gpu_pcie", index=0, rx_bytes_per_s=1_000_000_000, tx_bytes_per_s=None),
            record(990, "gpu_pcie", index=0, rx_bytes_per_s=3_000_000_000, tx_bytes_per_s=None),
        ]
        write(folder, "measure-train-b32.json", summary(("pytorch", 350, 350.0, 100_000_000), ("libtorch", 350)))
        write(folder, "measure-train-b32.records.json", {"header": {}, "records": records})
        # A session in a container: NVML names no process of its own, and no device reading came.
        write(folder, "record-eval-all.json", summary(("pytorch", None)))
        write(folder, "record-eval-all.records.json", {"header": {}, "records": [
            record(0, "session_start", device="cuda"),
            record(1, "gpu_processes_unavailable", reason="NVML reports the host's process IDs"),
            record(2, "worker_started", "pytorch", pid=12, command=[]),
        ]})
        cls.markdown = figures(folder)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_top_kernels_rank_by_gpu_time_with_shares_and_the_most_frequent_shape(self):
        top = rows(self.markdown, "top kernels by GPU time", "measure-train-b32")
        pytorch = [r[1:] for r in top if r[0] == "pytorch"]
        self.assertEqual(pytorch, [
            ["`gemm`", "40", "120.000", "80.0%", "(64,2,1)", "(128,1,1)"],
            ["`cudnn::bn_fw_tr_1C11_kernel_NCHW`", "4", "19.000", "12.7%", "(1,1,1)", "(32,1,1)"],
            [f"`{RELU}`", "11", "11.000", "7.3%", "(512,2,1)", "(128,1,1)"],
        ])
        libtorch = [r[1:5] for r in top if r[0] == "libtorch"]
        self.assertEqual([r[0] for r in libtorch], [f"`k{i}`" for i in range(9, 1, -1)])
        self.assertEqual(libtorch[0][1:], ["1", "10.000", "18.2%"])
        self.assertEqual(libtorch[-1][1:], ["1", "3.000", "5.5%"])

    def test_relu_grids_merge_over_the_session_most_frequent_first(self):
        relu = rows(self.markdown, "elementwise ReLU launch grids", "measure-train-b32")
        self.assertEqual(relu, [
            ["pytorch", f"`{RELU}`", "11", "(512,2,1) × 6, (1024,2,1) × 5"],
            ["libtorch", "none recorded", "-", "-"],
        ])

    def test_h2d_per_step_is_the_summarys_placed_figure_beside_the_workers_and_the_sessions_sources(self):
        h2d = rows(self.markdown, "host-to-device copies per step (CUPTI)", "measure-train-b32")
        self.assertEqual(h2d, [
            # Every window's copies by source: the upload's 100 MB and three pageable copies, one pinned.
            ["pytorch", "350", "350", "1.000", "100000000", "-", "100003400, 53.0", "400, 0.2"],
            ["libtorch", "-", "350", "-", "-", "-", "-, -", "700, 0.1"],
        ])
        self.assertEqual(rows(self.markdown, "host-to-device copies per step (CUPTI)", "record-eval-all"),
                         [["pytorch", "none recorded", "-", "-", "-", "-", "-, -", "-, -"]])

    def test_nvml_means_per_worker_and_device_and_none_recorded(self):
        nvml = rows(self.markdown, "NVML readings", "measure-train-b32")
        self.assertEqual(nvml, [
            ["pytorch", "2", "2048 / 3072", "60.0 / 70.0"],
            ["libtorch", "1", "512 / 512", "none recorded"],
            ["0", "85.0", "2000.0", "none recorded"],
        ])
        self.assertEqual(rows(self.markdown, "NVML readings", "record-eval-all"), [
            ["pytorch", "0", "none recorded", "none recorded"],
            ["-", "none recorded", "none recorded", "none recorded"],
        ])
        self.assertIn("record-eval-all: NVML per process unavailable: NVML reports the host's process IDs",
                      self.markdown)

    def test_the_existing_tables_stay_and_exports_are_not_read_as_summaries(self):
        measured = rows(self.markdown, "measurements", "measure-train-b32")
        self.assertEqual([r[:2] for r in measured], [["pytorch", "ok"], ["libtorch", "ok"]])
        self.assertIn("No pair of runs finished.", section(self.markdown, "the collector's overhead"))
        self.assertNotIn(".records |", self.markdown)
        self.assertNotIn("No records export", self.markdown)

    def test_missing_fields_nulls_and_broken_files_do_not_crash_it(self):
        with tempfile.TemporaryDirectory() as folder:
            write(folder, "measure-odd.json", {"workers": None, "config": None})
            write(folder, "measure-odd.records.json", {"header": None, "records": [
                None, 3, "text", {},
                {"type": "kernels", "worker": "pytorch", "kernels": [
                    None, {}, {"name": None}, {"name": "relu", "count": "x", "grid": [1, 2]},
                    {"name": "threshold", "count": 2, "total_ns": None,
                     "grid_histogram": [[1, 2], "bad", [[1, 2, 3], None], [[4, 5, 6], 2]]},
                ], "copies": [None, {"kind": "host_to_device"}]},
                {"type": "step", "worker": "pytorch"},
                {"type": "kernels", "worker": "pytorch", "copies": None},
                {"type": "step", "worker": "pytorch"},
                {"type": "kernels", "worker": "pytorch",
                 "copies": [{"kind": "host_to_device", "src": 7, "bytes": "many"}]},
                {"type": "gpu_process", "worker": "pytorch", "memory_bytes": "big", "sm_percent": None},
                {"type": "gpu_device", "index": None, "utilization_percent": True},
                {"type": "gpu_pcie", "rx_bytes_per_s": None},
                {"type": "gpu_unavailable", "reason": None},
                {"type": "collector", "worker": "libtorch", "active": False, "detail": "no | libcupti\nfound"},
            ]})
            write(folder, "measure-empty.json", [])
            write(folder, "measure-empty.records.json", [])
            write(folder, "overhead-1.json", {"workers": [None]})
            write(folder, "overhead-2-cupti.json", {"workers": [{"throughput_samples_per_s": 0}]})
            write(folder, "record-cut.json", '{"workers": [')
            write(folder, "record-cut.records.json", '{"header": {}, "records": [\n{"v":1')
            write(folder, "record-none.json", summary(("libtorch", 1)))
            markdown = figures(folder)
        self.assertIn("| measure-odd | pytorch | `threshold` | 2 | (4,5,6) × 2 |", markdown)
        inactive = "| measure-odd | libtorch | none recorded (collector inactive: no \\| libcupti found) |"
        self.assertIn(inactive, markdown)
        self.assertIn("No records export (NAME.records.json) for record-none", markdown)
        unreadable = section(markdown, "files that could not be read")
        self.assertIn("- record-cut.json: JSONDecodeError", unreadable)
        self.assertIn("- record-cut.records.json: JSONDecodeError", unreadable)

    def test_an_empty_folder_gives_the_two_tables(self):
        with tempfile.TemporaryDirectory() as folder:
            markdown = figures(folder)
        self.assertIn("## Figures: measurements", markdown)
        self.assertIn("No pair of runs finished.", markdown)
        self.assertNotIn("top kernels", markdown)


def losses_session(workers_losses):
    """A records export in which each worker reports the given loss at steps 0, 1, 2…"""
    records = [record(0, "session_start", device="cuda")]
    for worker, losses in workers_losses.items():
        records += [record(10 + n, "step", worker, step=n, epoch=0, phase="train", batch_size=32, loss=loss)
                    for n, loss in enumerate(losses)]
    return {"header": {}, "records": records}


def worker(impl, throughput, p50, **more):
    return {"impl": impl, "status": "ok", "throughput_samples_per_s": throughput, "sample_time_ms": {"p50": p50}} | more


class SpreadsTest(unittest.TestCase):
    """Constructed summaries and records of repeated sessions, the collector's pairs and a --cmd session: the
    arithmetic of the levels' agreement, the spreads and the pairs' medians."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        folder = cls.folder.name
        # Run 1: aten 0.5% from libtorch at step 1; run 2: aten 5% off at step 2, libtorch the same in both.
        write(folder, "measure-levels-train-b32-1.records.json",
              losses_session({"libtorch": [2.0, 1.0, 0.5], "aten": [2.0, 1.005, 0.5]}))
        write(folder, "measure-levels-train-b32-2.records.json",
              losses_session({"libtorch": [2.0, 1.0, 0.5], "aten": [2.0, 1.0, 0.525]}))
        for run, (libtorch, aten) in enumerate([(100, 90), (120, 96), (110, 110)], start=1):
            write(folder, f"measure-levels-eval-b32-{run}.json",
                  {"workers": [worker("libtorch", libtorch, 1.0), worker("aten", aten, 2.0 * run)]})
        for pair, (cupti, nocupti) in enumerate([(97, 100), (90, 100), (99, 100), (95, 100), (100, 100)], start=1):
            write(folder, f"overhead-{pair}-cupti.json", {"workers": [worker("libtorch", cupti, 0.3)]})
            write(folder, f"overhead-{pair}-nocupti.json", {"workers": [worker("libtorch", nocupti, 0.2)]})
        phases = {p: {"p50_ms": ms, "share": 0.2} for p, ms in
                  zip(("data", "forward", "backward", "optimizer", "other"), (1, 2, 3, 4, 5))}
        write(folder, "measure-cmd-scripts.json", {"workers": [
            worker("loop", 500, 0.1, steps=60, loss={"first": 2.3, "last": 0.4}, step_time_ms={"p50": 15.0},
                   script={"phases": phases}),
            worker("lightning", 400, 0.1, steps=60, loss={"first": 2.3, "last": "nan"}, script={"phases": None}),
        ]})
        cls.markdown = figures(folder)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_each_levels_loss_is_set_against_libtorchs_at_every_step(self):
        self.assertEqual(rows(self.markdown, "the levels' losses step by step", "measure-levels-train-b32-1"),
                         [["aten", "libtorch", "3", "0.50% (1)", "-", "0.5000 / 0.5000"]])
        self.assertEqual(rows(self.markdown, "the levels' losses step by step", "measure-levels-train-b32-2"),
                         [["aten", "libtorch", "3", "5.00% (2)", "2", "0.5250 / 0.5000"]])
        self.assertIn("- measure-levels-train-b32-1: every level within 1% of libtorch at every step", self.markdown)
        self.assertIn("- measure-levels-train-b32-2: parts from libtorch: aten at step 2", self.markdown)

    def test_a_level_whose_loss_moves_between_runs_is_named(self):
        self.assertEqual(rows(self.markdown, "the levels' losses step by step", "measure-levels-train-b32"), [
            ["libtorch", "2", "3", "0.00% (2)", "yes"],
            ["aten", "2", "3", "5.00% (2)", "no"],
        ])

    def test_repeated_sessions_give_medians_and_ranges(self):
        spread = rows(self.markdown, "spreads across repeated sessions", "measure-levels-eval-b32")
        self.assertEqual([r[:4] for r in spread], [
            ["libtorch", "3", "110.0 (100.0–120.0)", "1.000 (1.000–1.000)"],
            ["aten", "3", "96.0 (90.0–110.0)", "4.000 (2.000–6.000)"],
        ])
        # Each run against its own libtorch: 0.9, 0.8 and 1.0.
        self.assertEqual([r[-1] for r in spread], ["1.000 (1.000–1.000)", "0.900 (0.800–1.000)"])

    def test_the_collectors_pairs_give_their_median_spread_and_each_side(self):
        overhead = section(self.markdown, "the collector's overhead")
        self.assertIn("5 alternating pairs: median 0.970 (range 0.900–1.000; target ≥ 0.97); "
                      "each pair: 0.970, 0.900, 0.990, 0.950, 1.000.", overhead)
        self.assertIn("| with the collector | 5 | 97.0 (90.0–100.0) | 0.300 (0.300–0.300) | - |", overhead)
        self.assertIn("| --no-cupti | 5 | 100.0 (100.0–100.0) | 0.200 (0.200–0.200) | - |", overhead)

    def test_scripts_show_their_steps_losses_and_phases(self):
        self.assertEqual(rows(self.markdown, "your own scripts (--cmd)", "measure-cmd-scripts"), [
            ["loop", "ok", "60", "2.3000 / 0.4000", "15.00", "1.00 / 2.00 / 3.00 / 4.00 / 5.00", "-", "-", "-", "-"],
            ["lightning", "ok", "60", "2.3000 / -", "-", "-", "-", "-", "-", "-"],
        ])


class RealRecordingTest(unittest.TestCase):
    """A real CPU recording, exported by golow itself: figures.py must read the schema golow writes, and a run
    without a GPU must read as one, not crash."""

    @classmethod
    def setUpClass(cls):
        # make test builds them first: missing, they are a failure of the run, never a skip that passes.
        missing = [path for path in (GOLOW, WORKER) if not os.access(path, os.X_OK)]
        if missing:
            raise AssertionError(f"{', '.join(missing)} missing: build them (make build; make test does) and run again")

    def test_a_cpu_recording_reads_as_having_no_kernels(self):
        with tempfile.TemporaryDirectory() as folder:
            summaries = os.path.join(folder, "summaries")
            os.mkdir(summaries)
            recording = os.path.join(folder, "record-cpu.golow")
            run = subprocess.run(
                [GOLOW, "run", "--headless", "--impl", "libtorch", "--device", "cpu", "--model", "resnet50",
                 "--dataset", "synthetic", "--resolution", "32", "--batch-size", "4", "--steps", "3",
                 "--warmup", "1", "--record", recording,
                 "--summary-json", os.path.join(summaries, "record-cpu.json")],
                cwd=folder, capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr[-2000:])
            export = subprocess.run(
                [GOLOW, "export", "--format", "json",
                 "--output", os.path.join(summaries, "record-cpu.records.json"), recording],
                capture_output=True, text=True, timeout=60)
            self.assertEqual(export.returncode, 0, export.stderr)
            with open(os.path.join(summaries, "record-cpu.records.json"), encoding="utf-8") as f:
                kinds = {r["type"] for r in json.load(f)["records"]}
            self.assertIn("step", kinds)
            self.assertNotIn("kernels", kinds)
            markdown = figures(summaries)
        self.assertEqual(rows(markdown, "top kernels by GPU time", "record-cpu"),
                         [["libtorch", "none recorded (a CPU run)", "-", "-", "-", "-", "-"]])
        self.assertEqual(rows(markdown, "elementwise ReLU launch grids", "record-cpu"),
                         [["libtorch", "none recorded (a CPU run)", "-", "-"]])
        h2d = rows(markdown, "host-to-device copies per step (CUPTI)", "record-cpu")
        self.assertEqual([r[:2] for r in h2d], [["libtorch", "none recorded"]])
        self.assertEqual(rows(markdown, "NVML readings", "record-cpu")[0], ["libtorch", "0", "none recorded",
                                                                           "none recorded"])


class RealLevelsTest(unittest.TestCase):
    """Two levels, twice over, on this CPU, recorded and exported by golow itself: libtorch and aten agree bitwise
    here, so the losses table must find them within 1% at every step and the same in every run."""

    @classmethod
    def setUpClass(cls):
        RealRecordingTest.setUpClass()

    def test_levels_on_the_cpu_agree_at_every_step_and_in_every_run(self):
        with tempfile.TemporaryDirectory() as folder:
            run = subprocess.run(
                [GOLOW, "run", "--headless", "--impl", "libtorch,aten", "--device", "cpu", "--model", "resnet18",
                 "--dataset", "synthetic", "--resolution", "32", "--batch-size", "4", "--steps", "4", "--warmup", "1",
                 "--no-ops", "--repeat", "2", "--record", os.path.join(folder, "measure-levels.golow"),
                 "--summary-json", os.path.join(folder, "measure-levels.json")],
                cwd=folder, capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr[-2000:])
            for n in (1, 2):
                export = subprocess.run(
                    [GOLOW, "export", "--format", "json", "--output",
                     os.path.join(folder, f"measure-levels-{n}.records.json"),
                     os.path.join(folder, f"measure-levels-{n}.golow")], capture_output=True, text=True, timeout=60)
                self.assertEqual(export.returncode, 0, export.stderr)
            markdown = figures(folder)
        title = "the levels' losses step by step"
        for n in (1, 2):
            self.assertEqual([r[:5] for r in rows(markdown, title, f"measure-levels-{n}")],
                             [["aten", "libtorch", "4", "0.00% (3)", "-"]])
        self.assertEqual(rows(markdown, title, "measure-levels"), [
            ["libtorch", "2", "4", "0.00% (3)", "yes"], ["aten", "2", "4", "0.00% (3)", "yes"]])
        self.assertEqual([r[:2] for r in rows(markdown, "spreads across repeated sessions", "measure-levels")],
                         [["libtorch", "2"], ["aten", "2"]])


if __name__ == "__main__":
    unittest.main()
