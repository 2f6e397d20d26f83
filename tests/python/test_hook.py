"""Tests for golow's PYTHONPATH hook (src/workers/pyhook/): real scripts, real torch, a real socket.

Run with the venv that has torch (make test does):
    .venv/bin/python -m unittest discover --start-directory tests/python --top-level-directory tests/python
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import event_schema

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "workers", "pyhook")

TRAIN = """
import torch
model = torch.nn.Linear(4, 1)
x, y = torch.randn(8, 4), torch.randn(8, 1)

def run(opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

run(torch.optim.SGD(model.parameters(), lr=0.1), 5)
run(torch.optim.Adam(model.parameters(), lr=0.01), 2)
print("trained", flush=True)
"""

FORK = """
import os, torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def step():
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()

step()
pid = os.fork()
if pid == 0:
    for _ in range(3):
        step()
    os._exit(0)
_, status = os.waitpid(pid, 0)
step()
print("child status", status, flush=True)
"""

EVAL = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
loss_fn = torch.nn.CrossEntropyLoss()
with torch.no_grad():
    loss_fn(torch.randn(3, 2), torch.tensor([0, 1, 0]))  # a module without parameters is not the model
    for _ in range(6):
        loss_fn(model(torch.randn(3, 4)), torch.tensor([0, 1, 0]))
print("evaluated", flush=True)
"""

NO_TORCH = """
import json, sys
print("torch" in sys.modules, flush=True)
"""


class Monitor:
    """A socket like golow's: every connection's lines, in the order the connections came, each event checked
    against the schema of what the monitor reads there."""

    def __init__(self, path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.streams = []
        self.threads = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            lines = []
            self.streams.append(lines)
            t = threading.Thread(target=self._read, args=(conn, lines), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, conn, lines):
        with conn, conn.makefile("r") as f:
            for line in f:
                lines.append(line)

    def close(self):
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.accepting.join(10)
        for t in self.threads:
            t.join(30)
        for lines in self.streams:
            for line in lines:
                assert line.endswith("\n"), line
        return [[event_schema.script_line(line) for line in lines] for lines in self.streams]


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


class Monitored(unittest.TestCase):
    """Runs scripts as golow does, with the hook on PYTHONPATH and a socket like golow's."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.socket_path = os.path.join(self.tmp.name, "events.sock")

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def env(self, pythonpath=HOOK_DIR, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GOLOW_EVENT_SOCKET", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
        env["PYTHONPATH"] = pythonpath
        env.update(extra)
        return env

    def run_monitored(self, source, pythonpath=HOOK_DIR, **extra):
        """Run a script the way golow does; return (process, each connection's events)."""
        script = self.write("script.py", source)
        monitor = Monitor(self.socket_path)
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, script], capture_output=True, text=True, timeout=300,
                cwd=self.tmp.name, env=self.env(pythonpath, GOLOW_EVENT_SOCKET=self.socket_path, **extra))
        finally:
            self.wall_ms = (time.monotonic() - started) * 1e3
            streams = monitor.close()
        return proc, streams

    def assert_steps(self, events, optimizer, n):
        steps = [e for e in of_type(events, "optimizer_step") if e["optimizer"] == optimizer]
        self.assertEqual([e["step"] for e in steps], list(range(n)))
        self.assertIsNone(steps[0]["interval_ms"])
        # Each step does real work (a forward and backward pass, an optimiser step), timed to the microsecond: more
        # than nothing, and all of them within the script's own run.
        intervals = [e["interval_ms"] for e in steps[1:]]
        for interval in intervals:
            self.assertGreater(interval, 0)
        self.assertLess(sum(intervals), self.wall_ms)


class HookTest(Monitored):
    def test_each_optimiser_counts_its_own_steps(self):
        proc, streams = self.run_monitored(TRAIN)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual((proc.stdout, proc.stderr), ("trained\n", ""))
        self.assertEqual(len(streams), 1)
        events = streams[0]
        self.assertEqual(events[0]["type"], "script_process")
        self.assertGreater(events[0]["pid"], 1)
        self.assertEqual(
            [(e["optimizer"], e["class"], e["lr"]) for e in of_type(events, "optimizer")],
            [(0, "SGD", 0.1), (1, "Adam", 0.01)])
        self.assert_steps(events, 0, 5)
        self.assert_steps(events, 1, 2)
        first = of_type(events, "optimizer_step")[0]
        self.assertGreater(first["first_step_ms"], 0)
        self.assertTrue(all("first_step_ms" not in e for e in of_type(events, "optimizer_step")[1:]))
        # The model's first forward pass came before the first step; none are reported after it.
        self.assertEqual([e["pass"] for e in of_type(events, "forward_pass")], [0])
        kinds = [e["type"] for e in events]
        self.assertLess(kinds.index("forward_pass"), kinds.index("optimizer_step"))

    def test_each_step_says_when_its_backward_pass_began(self):
        """The arrival at the all-reduce: the start of the latest backward pass before each step, on the monotonic
        clock the monitor's own time.monotonic_ns reads; a step with no backward since the last says none."""
        before = __import__("time").monotonic_ns()
        proc, streams = self.run_monitored(TRAIN + textwrap.dedent("""
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            opt.step()
            """))
        after = __import__("time").monotonic_ns()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        steps = of_type(streams[0], "optimizer_step")
        self.assertEqual(len(steps), 5 + 2 + 1)
        arrivals = [e["arrived_ns"] for e in steps[:7]]
        self.assertTrue(all(before < a < after for a in arrivals), arrivals)
        self.assertEqual(arrivals, sorted(arrivals))
        self.assertNotIn("arrived_ns", steps[7])

    def test_the_process_says_who_it_is_in_compact_json(self):
        script = self.write("script.py", TRAIN)
        monitor = Monitor(self.socket_path)
        subprocess.run([sys.executable, script], capture_output=True, timeout=300, check=True,
                       env=self.env(GOLOW_EVENT_SOCKET=self.socket_path, RANK="1", LOCAL_RANK="1",
                                    WORLD_SIZE="2", OMP_NUM_THREADS="1"))
        monitor.close()
        first = monitor.streams[0][0]
        self.assertNotIn(" ", first)
        hello = json.loads(first)
        self.assertEqual(set(hello), {"type", "pid", "rank", "local_rank", "world_size", "python", "torch",
                                      "threads"})
        self.assertEqual((hello["rank"], hello["local_rank"], hello["world_size"]), (1, 1, 2))
        self.assertEqual(hello["threads"], 1)
        self.assertTrue(hello["torch"].startswith("2."))

    def test_without_a_socket_is_silent(self):
        script = self.write("script.py", TRAIN)
        proc = subprocess.run([sys.executable, script], capture_output=True,
                              text=True, timeout=300, env=self.env())
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "trained\n", ""))

    def test_a_socket_that_cannot_be_reached_is_silent(self):
        script = self.write("script.py", TRAIN)
        plain = self.write("plain.txt", "not a socket")
        for value in ("/nonexistent/events.sock", plain, "\x01garbage", self.tmp.name):
            with self.subTest(path=value):
                proc = subprocess.run(
                    [sys.executable, script], capture_output=True, text=True,
                    timeout=300, env=self.env(GOLOW_EVENT_SOCKET=value))
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "trained\n", ""))
        with open(plain) as f:
            self.assertEqual(f.read(), "not a socket")

    def test_monitor_going_away_does_not_break_the_script(self):
        # Enough steps to fill the socket's buffer after the monitor closed its end; also with SIGPIPE back at its
        # default (fatal) action.
        many = TRAIN.replace("run(torch.optim.SGD(model.parameters(), lr=0.1), 5)",
                             "run(torch.optim.SGD(model.parameters(), lr=0.1), 3000)")
        for sigpipe in ("", "import signal; signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"):
            with self.subTest(sigpipe_default=bool(sigpipe)):
                script = self.write("script.py", sigpipe + many)
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                path = os.path.join(self.tmp.name, "gone%d.sock" % bool(sigpipe))
                server.bind(path)
                server.listen(1)
                proc = subprocess.Popen(
                    [sys.executable, script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=self.env(GOLOW_EVENT_SOCKET=path))
                conn, _ = server.accept()
                self.assertEqual(event_schema.script_line(conn.makefile("r").readline())["type"], "script_process")
                conn.close()
                server.close()
                out, err = proc.communicate(timeout=300)
                self.assertEqual((proc.returncode, out, err), (0, "trained\n", ""))

    def test_a_reused_descriptor_number_is_not_written_to(self):
        # After its first step the script closes golow's socket and a file of its own gets the number.
        source = TRAIN.replace("run(torch.optim.SGD(model.parameters(), lr=0.1), 5)", textwrap.dedent("""
            run(torch.optim.SGD(model.parameters(), lr=0.1), 1)
            import os
            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    if os.readlink("/proc/self/fd/%d" % fd).startswith("socket:"):
                        os.dup2(os.open("data.txt", os.O_WRONLY | os.O_CREAT), fd)
                except OSError:
                    pass
            run(torch.optim.SGD(model.parameters(), lr=0.1), 4)
            """)) + "print(repr(open('data.txt').read()))\n"
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n''\n")
        self.assertEqual(len(of_type(streams[0], "optimizer_step")), 1)

    def test_a_forked_child_reports_on_its_own_connection(self):
        proc, streams = self.run_monitored(FORK)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "child status 0\n")
        self.assertEqual(len(streams), 2, streams)
        by_steps = sorted(streams, key=lambda events: len(of_type(events, "optimizer_step")))
        parent, child = by_steps[0], by_steps[1]
        self.assert_steps(parent, 0, 2)
        self.assert_steps(child, 0, 3)
        self.assertNotEqual(parent[0]["pid"], child[0]["pid"])
        self.assertEqual(child[0]["type"], "script_process")
        # The child trains like its parent: no forward passes of its own.
        self.assertEqual(of_type(child, "forward_pass"), [])

    def test_a_launched_process_reports_too(self):
        # What torchrun, mp.spawn and accelerate do: start a new interpreter, which inherits the socket's name.
        child = self.write("child.py", TRAIN)
        source = f"""
        import subprocess, sys
        subprocess.run([sys.executable, {child!r}], check=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(streams), 1, "the launcher itself said nothing")
        self.assert_steps(streams[0], 0, 5)

    def test_an_evaluation_loop_is_measured_by_its_models_forward_passes(self):
        proc, streams = self.run_monitored(EVAL)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "evaluated\n", ""))
        passes = of_type(streams[0], "forward_pass")
        self.assertEqual([p["pass"] for p in passes], list(range(6)))
        self.assertTrue(all(p["grad"] is False and p["ms"] > 0 for p in passes), passes)
        self.assertIsNone(passes[0]["interval_ms"])
        self.assertTrue(all(p["interval_ms"] >= p["ms"] * 0.5 for p in passes[1:]), passes)

    def test_a_compiled_model_is_measured_without_graph_breaks_or_recompiles(self):
        source = """
        import torch, torch._dynamo
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        compiled = torch.compile(model)
        with torch.no_grad():
            for _ in range(3):
                compiled(torch.randn(3, 4))
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            compiled(torch.randn(3, 4)).sum().backward()
            opt.step()
        compiled(torch.randn(3, 4))  # after the first step, as before it: no recompilation
        print(dict(torch._dynamo.utils.counters["graph_break"]), flush=True)
        print(torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs, flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "", "golow's hooks made torch warn")
        # One graph more: the training graph, compiled once.
        self.assertEqual(proc.stdout, "{}\n1\n")
        events = streams[0]
        self.assertEqual(len(of_type(events, "forward_pass")), 4, events)
        self.assert_steps(events, 0, 3)

    def test_a_model_golow_times_still_scripts_traces_and_saves_as_without_golow(self):
        # A module's own hooks would go with it: TorchScript would compile them, torch.save pickle them.
        saved = os.path.join(self.tmp.name, "whole.pt")
        source = f"""
        import torch
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        m(torch.randn(2, 4))
        print(tuple(torch.jit.script(m)(torch.randn(2, 4)).shape), flush=True)
        print(tuple(torch.jit.trace(m, torch.randn(2, 4))(torch.randn(2, 4)).shape), flush=True)
        torch.save(m, {saved!r})
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "(2, 8)\n(2, 8)\n", ""))
        self.assertGreaterEqual(len(of_type(streams[0], "forward_pass")), 1)
        load = subprocess.run(
            [sys.executable, "-c", f"import torch; print(torch.load({saved!r}, weights_only=False)[0])"],
            capture_output=True, text=True, timeout=300, env=self.env(""))
        self.assertEqual(load.returncode, 0, load.stderr)
        self.assertIn("Linear(in_features=4", load.stdout)

    def test_one_step_in_n_past_the_warmup_has_its_operators_recorded_by_rank_0_alone(self):
        """As golow lays the hook out: golow_operators.py (the pytorch worker's) beside it. One step in 4 may be
        profiled from half of that past 2 of warm-up (step 4: the first step past the warm-up is rarely like the
        others yet), from the previous step's end to its own; the first always is (later ones only within the 2%
        budget, which a tiny model's steps never give), and its operators go out as one window by the process's
        end."""
        pythonpath = HOOK_DIR
        train = TRAIN.replace("run(torch.optim.SGD(model.parameters(), lr=0.1), 5)",
                              "run(torch.optim.SGD(model.parameters(), lr=0.1), 12)")
        proc, streams = self.run_monitored(train, pythonpath, GOLOW_OPS_EVERY="4", GOLOW_OPS_WARMUP="2")
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        events = streams[0]
        first = [e for e in of_type(events, "optimizer_step") if e["optimizer"] == 0]
        profiled = [e["step"] for e in first if e.get("profiled")]
        self.assertEqual(profiled[0], 4, first)
        self.assertTrue(set(profiled) <= {4, 8}, profiled)
        self.assertFalse(any(e.get("profiled") for e in of_type(events, "optimizer_step") if e["optimizer"] == 1),
                         "only the first optimiser's steps are looked at")
        windows = of_type(events, "operators")
        self.assertEqual(sum(w["steps"] for w in windows), len(profiled))
        self.assertEqual(sum(w["compute_ms"] for w in windows),
                         sum(e["interval_ms"] for e in first if e.get("profiled")))
        names = {o["name"]: o for w in windows for o in w["operators"]}
        # The whole step: zero_grad, forward, backward, and the update's own operators (SGD's `add_`). The record of
        # the optimiser step itself is still open when its post-hook stops the profile, so it is not among them.
        for op in ("Optimizer.zero_grad#SGD.zero_grad", "aten::addmm", "aten::mse_loss", "aten::mse_loss_backward"):
            self.assertIn(op, names)
        self.assertEqual(names["aten::add_"]["shapes"], "[1, 4] [1, 4]")
        self.assertEqual(names["aten::addmm"]["shapes"], "[1] [8, 4] [4, 1]")

        self.socket_path += "-rank-1"
        _, ranked = self.run_monitored(train, pythonpath, GOLOW_OPS_EVERY="4", GOLOW_OPS_WARMUP="2", RANK="1")
        self.assertEqual(of_type(ranked[0], "operators"), [], "rank 1 leaves looking to rank 0")
        self.assertFalse(any(e.get("profiled") for e in of_type(ranked[0], "optimizer_step")))

    def test_a_profile_begun_for_a_step_that_never_comes_ends_cleanly_at_exit(self):
        """Steps 7 and 17 are looked at (one in 10 from half of that past 2 of warm-up; 17: begun after step 16, the
        script's last); the script exits with step 17's profile still running, which golow stops at exit rather than
        leave to the interpreter's teardown (that crashed the process)."""
        slow = TRAIN.replace("        opt.step()\n", "        opt.step()\n        __import__('time').sleep(0.3)\n")
        slow = slow.replace("run(torch.optim.SGD(model.parameters(), lr=0.1), 5)",
                            "run(torch.optim.SGD(model.parameters(), lr=0.1), 17)")
        proc, streams = self.run_monitored(slow, HOOK_DIR, GOLOW_OPS_EVERY="10", GOLOW_OPS_WARMUP="2")
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        first = [e for e in of_type(streams[0], "optimizer_step") if e["optimizer"] == 0]
        self.assertEqual([e["step"] for e in first if e.get("profiled")], [7])
        self.assertEqual(sum(w["steps"] for w in of_type(streams[0], "operators")), 1)

    def test_the_api_reports_numbers_and_phases(self):
        source = textwrap.dedent("""
        import golow
        golow.phase("eval")
        golow.report(loss=0.5, samples=32, accuracy=float("nan"), label="x")
        """) + TRAIN
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        events = streams[0]
        self.assertEqual(of_type(events, "phase"), [{"type": "phase", "name": "eval"}])
        # A number that is not finite comes as the schema's word for it; what is no number at all, not at all.
        self.assertEqual([(e["name"], e["value"]) for e in of_type(events, "scalar")],
                         [("loss", 0.5), ("samples", 32.0), ("accuracy", "nan")])
        # Not monitored: the same calls do nothing.
        script = self.write("plain.py", source)
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300,
                              env=self.env())
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "trained\n", ""))

    def test_users_sitecustomize_still_runs(self):
        other = os.path.join(self.tmp.name, "usersite")
        self.write("usersite/sitecustomize.py", """
        import sys
        print("USER_SITECUSTOMIZE", __name__, flush=True)
        sys.user_site_marker = True
        """)
        source = TRAIN + "import sys; print(sys.user_site_marker)\n"
        proc, streams = self.run_monitored(source, HOOK_DIR + os.pathsep + other)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "USER_SITECUSTOMIZE sitecustomize\ntrained\nTrue\n")
        self.assert_steps(streams[0], 0, 5)

        # and without golow's socket too
        script = self.write("script.py", source)
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                              timeout=300, env=self.env(HOOK_DIR + os.pathsep + other))
        self.assertEqual(proc.stdout, "USER_SITECUSTOMIZE sitecustomize\ntrained\nTrue\n")

    def test_error_in_users_sitecustomize_is_reported_as_without_golow(self):
        other = os.path.join(self.tmp.name, "usersite")
        self.write("usersite/sitecustomize.py", "raise RuntimeError('user bug')\n")
        proc, streams = self.run_monitored(TRAIN, HOOK_DIR + os.pathsep + other)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assertIn("RuntimeError: user bug", proc.stderr)
        self.assert_steps(streams[0], 0, 5)

    def test_script_without_torch_does_not_import_it_nor_connect(self):
        proc, streams = self.run_monitored(NO_TORCH)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "False\n", ""))
        self.assertEqual(streams, [])

    def test_torch_imported_before_install(self):
        # E.g. a .pth file imported torch before sitecustomize ran.
        source = textwrap.dedent(f"""
        import os, runpy, torch
        runpy.run_path(os.path.join({HOOK_DIR!r}, "sitecustomize.py"))
        """) + TRAIN
        proc, streams = self.run_monitored(source, "")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assert_steps(streams[0], 0, 5)
        self.assertEqual(len(of_type(streams[0], "forward_pass")), 1)

    def assert_phases_add_up(self, event, passes=1):
        """A step's phases: each timed, the passes counted, and together no more than the step's interval (to the
        microsecond the hook rounds each to)."""
        phases = event["phases"]
        timed = [phases[k] for k in ("data_ms", "forward_ms", "backward_ms", "optimizer_ms")]
        self.assertTrue(all(ms >= 0 for ms in timed), event)
        self.assertLessEqual(sum(timed), event["interval_ms"] + 0.004, event)
        self.assertEqual((phases["forward_passes"], phases["backward_passes"]), (passes, passes), event)
        return phases

    def test_each_step_says_where_its_interval_went(self):
        source = """
        import time, torch
        from torch.utils.data import DataLoader, TensorDataset

        def slow(batch):
            time.sleep(0.03)  # a costly transform: the step waits on its data
            return torch.utils.data.default_collate(batch)

        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data = DataLoader(TensorDataset(torch.randn(64, 16), torch.randn(64, 1)), batch_size=8,
                          collate_fn=slow, num_workers=NUM_WORKERS)
        for x, y in data:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            time.sleep(0.02)  # logging, a checkpoint: the step's "other"
            with torch.no_grad():
                model(x)  # an evaluation pass is not the step's forward
        print("trained", flush=True)
        """
        for workers in (0, 2):
            with self.subTest(num_workers=workers):
                self.socket_path = os.path.join(self.tmp.name, f"events-{workers}.sock")
                proc, streams = self.run_monitored(source.replace("NUM_WORKERS", str(workers)))
                self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
                self.assertEqual(len(streams), 1, "a DataLoader's worker processes say nothing")
                steps = of_type(streams[0], "optimizer_step")
                self.assertEqual(len(steps), 8)
                self.assertNotIn("phases", steps[0])
                for step in steps[1:]:
                    phases = self.assert_phases_add_up(step)
                    other = step["interval_ms"] - sum(
                        phases[k] for k in ("data_ms", "forward_ms", "backward_ms", "optimizer_ms"))
                    self.assertGreaterEqual(other, 20, step)
                    self.assertGreater(phases["forward_ms"], 0, step)
                    self.assertGreater(phases["backward_ms"], 0, step)
                    self.assertGreater(phases["optimizer_ms"], 0, step)
                if workers == 0:
                    # In the process itself: every batch's transform is waited for.
                    self.assertTrue(all(s["phases"]["data_ms"] >= 30 for s in steps[1:]), steps)
                # The first iteration's backward pass came before any optimiser: said, then no more.
                self.assertEqual([e["pass"] for e in of_type(streams[0], "backward_pass")], [0])

    def test_an_evaluation_loaders_wait_between_steps_is_the_steps_other_not_its_data(self):
        source = """
        import time, torch
        from torch.utils.data import DataLoader, TensorDataset

        def slow(batch):
            time.sleep(0.03)
            return torch.utils.data.default_collate(batch)

        model = torch.nn.Linear(16, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        train = DataLoader(TensorDataset(torch.randn(48, 16), torch.randn(48, 1)), batch_size=8)
        held_out = DataLoader(TensorDataset(torch.randn(16, 16)), batch_size=8, collate_fn=slow)
        for x, y in train:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            with torch.no_grad():
                for (v,) in held_out:
                    model(v)
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        steps = of_type(streams[0], "optimizer_step")
        self.assertEqual(len(steps), 6)
        for step in steps[1:]:
            phases = self.assert_phases_add_up(step)
            self.assertLess(phases["data_ms"], 20, step)
            other = step["interval_ms"] - sum(
                phases[k] for k in ("data_ms", "forward_ms", "backward_ms", "optimizer_ms"))
            self.assertGreaterEqual(other, 60, step)
            self.assertEqual(phases["samples"], 8, "the training batch's, not the held-out ones'")

    def test_batches_from_anything_but_a_dataloaders_iterator_are_the_steps_other_and_change_nothing(self):
        # A DataLoader whose __iter__ the script replaced, a generator and a plain list of batches: their waits are
        # the step's "other" (none is a DataLoader's iterator), the steps are counted, and what the script computes
        # is what it computes without golow.
        source = """
        import time, torch
        from torch.utils.data import DataLoader, TensorDataset

        class Own(DataLoader):
            def __iter__(self):
                for i in range(0, len(self.dataset), self.batch_size):
                    time.sleep(0.02)
                    yield self.dataset[i:i + self.batch_size]

        def generated():
            for _ in range(4):
                time.sleep(0.02)
                yield torch.ones(8, 4), torch.zeros(8, 1)

        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [(torch.ones(8, 4), torch.zeros(8, 1))] * 4
        sources = (Own(TensorDataset(torch.ones(32, 4), torch.zeros(32, 1)), batch_size=8), generated(), batches)
        for source in sources:
            for x, y in source:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        print(model.weight.sum().item(), flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        alone = subprocess.run([sys.executable, self.write("alone.py", source)], capture_output=True, text=True,
                               timeout=300, cwd=self.tmp.name, env=self.env(""))
        self.assertEqual(proc.stdout, alone.stdout, "the script's result is its own")
        steps = of_type(streams[0], "optimizer_step")
        self.assertEqual(len(steps), 12)
        for step in steps[1:]:
            phases = self.assert_phases_add_up(step)
            self.assertEqual(phases["data_ms"], 0, step)
            self.assertEqual(phases["samples"], 8, step)

    def test_gradient_accumulation_is_one_step_of_several_passes(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(5):
            for micro in range(4):
                (model(torch.randn(8, 4)).sum() / 4).backward()
            opt.step()
            opt.zero_grad()
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        self.assert_steps(streams[0], 0, 5)
        for step in of_type(streams[0], "optimizer_step")[1:]:
            self.assert_phases_add_up(step, passes=4)
        # Before the first step golow could not know an optimiser would come: those passes were said, and only those.
        self.assertEqual([e["pass"] for e in of_type(streams[0], "backward_pass")], [0, 1, 2, 3])

    def test_a_closure_is_one_step_however_many_passes_it_runs(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        x, y = torch.randn(32, 4), torch.randn(32, 1)
        # Never converged: every step runs its closure as often as it may.
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, tolerance_grad=-1, tolerance_change=-1)
        passes = []

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            passes[-1] += 1
            return loss

        for _ in range(4):
            passes.append(0)
            opt.step(closure)
        print(passes, flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        passes = json.loads(proc.stdout)
        self.assertTrue(all(n > 1 for n in passes), passes)
        self.assert_steps(streams[0], 0, 4)
        for step, n in zip(of_type(streams[0], "optimizer_step")[1:], passes[1:]):
            self.assert_phases_add_up(step, passes=n)
        self.assertEqual(of_type(streams[0], "backward_pass"), [], "the closure's passes are the optimiser's")

    def test_steps_a_grad_scaler_skips_are_said_and_start_the_next_interval(self):
        source = """
        import time, torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4)
        for step in range(6):
            opt.zero_grad()
            loss = model(torch.randn(8, 4)).sum()
            if step in (2, 3):
                loss = loss * float("inf")  # an overflow: the scaler skips this step
                time.sleep(0.05)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        steps = of_type(streams[0], "optimizer_step")
        self.assertEqual([(s["step"], s.get("skipped", False)) for s in steps],
                         [(0, False), (1, False), (2, True), (2, True), (2, False), (3, False)])
        for step in steps[1:]:
            self.assert_phases_add_up(step)
        # The step after the skips is timed from the last skip, not from the step before them.
        self.assertLess(steps[4]["interval_ms"], 50, steps)
        self.assertGreaterEqual(steps[2]["interval_ms"], 50, steps)

    def test_training_without_an_optimiser_is_counted_by_backward_passes(self):
        # PyTorch's word_language_model example: the parameters are updated by hand after each backward pass.
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        for step in range(5):
            model.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-0.01)
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        passes = of_type(streams[0], "backward_pass")
        self.assertEqual([p["pass"] for p in passes], list(range(5)))
        self.assertIsNone(passes[0]["interval_ms"])
        self.assertNotIn("phases", passes[0])
        for p in passes[1:]:
            phases = self.assert_phases_add_up(p)
            self.assertEqual(phases["optimizer_ms"], 0)
        self.assertEqual(of_type(streams[0], "optimizer_step"), [])

    def test_wrapper_loaders_leave_no_trace(self):
        source = textwrap.dedent("""
        import sys
        import torch.optim.optimizer as o, torch.nn.modules.module as m
        for module in (o, m):
            print(type(module.__loader__).__name__, module.__spec__.loader is module.__loader__)
        print(sorted(f._target for f in sys.meta_path if type(f).__name__ == "_Finder"))
        """) + TRAIN
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # torch's finders went once they found their module; those of frameworks the script never imports wait.
        waiting = ["lightning.pytorch.strategies.strategy", "pytorch_lightning.strategies.strategy",
                   "transformers.trainer"]
        self.assertEqual(proc.stdout, f"SourceFileLoader True\nSourceFileLoader True\n{waiting}\ntrained\n")
        # The wrappers did their work before leaving: the hooks they registered on both modules reported (no trace
        # because no hook was loaded would pass the lines above too).
        self.assertEqual(len(streams), 1, streams)
        self.assertEqual(streams[0][0]["type"], "script_process")
        self.assert_steps(streams[0], 0, 5)
        self.assertEqual(len(of_type(streams[0], "forward_pass")), 1)

    LIGHTNING = """
    import torch, lightning as L
    from torch.utils.data import DataLoader, TensorDataset
    {report}
    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 2)
        def training_step(self, batch, i):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            print(loss.item(), flush=True)
            return {{"loss": loss}}
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    L.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(Net(), DataLoader(data, batch_size=8))
    """

    def losses(self, report):
        proc, streams = self.run_monitored(textwrap.dedent(self.LIGHTNING.format(report=report)))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        said = [e["value"] for e in of_type(streams[0], "scalar") if e["name"] == "loss"]
        return [float(line) for line in proc.stdout.split()], said

    def test_lightnings_loss_is_said_for_every_step_as_its_training_step_returned_it(self):
        printed, said = self.losses("")
        self.assertEqual(len(printed), 4)
        self.assertEqual(said, printed)

    def test_a_script_that_reports_its_loss_keeps_it(self):
        printed, said = self.losses("import golow; golow.report(loss=123.0)")
        self.assertEqual(len(printed), 4)
        self.assertEqual(said, [123.0])


class FiguresTest(Monitored):
    """What the hook says of a script's steps is what the script itself would say: its loss, its samples, the times
    the events stand for, and what the hook itself took."""

    def said_losses(self, streams):
        """The losses the worker's steps carry (its first optimiser's), and those said on their own."""
        return [e["loss"] if e["type"] == "optimizer_step" else e["value"] for e in streams[0]
                if (e["type"] == "optimizer_step" and e["optimizer"] == 0 and "loss" in e)
                or (e["type"] == "scalar" and e["name"] == "loss")]

    def test_a_plain_scripts_loss_is_what_backward_was_called_on(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            print(loss.item(), flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        printed = [float(v) for v in proc.stdout.split()]
        self.assertEqual(self.said_losses(streams), printed)

    def test_a_gans_loss_is_its_first_optimisers_backward_passes_summed(self):
        # The discriminator's step follows two backward passes (real, fake): its loss is their sum, as a DCGAN prints
        # it; the generator's backward pass belongs to the second optimiser, not to the worker's step.
        source = """
        import torch
        G, D = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)
        og, od = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
        bce = torch.nn.BCEWithLogitsLoss()
        for _ in range(5):
            real, z = torch.randn(16, 16), torch.randn(16, 8)
            od.zero_grad()
            err_real = bce(D(real), torch.ones(16, 1)); err_real.backward()
            fake = G(z)
            err_fake = bce(D(fake.detach()), torch.zeros(16, 1)); err_fake.backward()
            od.step()
            og.zero_grad()
            err_g = bce(D(fake), torch.ones(16, 1)); err_g.backward()
            og.step()
            print(err_real.item() + err_fake.item(), flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        printed = [float(v) for v in proc.stdout.split()]
        self.assertEqual(self.said_losses(streams), printed)

    def test_a_closures_loss_is_its_first_evaluation_as_the_optimiser_returns_it(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        x, y = torch.randn(32, 4), torch.randn(32, 1)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        for _ in range(3):
            print(opt.step(closure).item(), flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        printed = [float(v) for v in proc.stdout.split()]
        self.assertEqual(self.said_losses(streams), printed)

    def test_a_loss_a_grad_scaler_scaled_is_said_unscaled_and_a_reported_one_wins(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        for _ in range(4):
            opt.zero_grad()
            loss = model(torch.randn(8, 4)).pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            print(loss.item(), flush=True)
        """
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        printed = [float(v) for v in proc.stdout.split()]
        self.assertEqual(self.said_losses(streams), printed)
        self.socket_path += "-reported"
        proc, streams = self.run_monitored("import golow\ngolow.report(loss=7.0)\n" + textwrap.dedent(source))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.said_losses(streams), [7.0])

    def samples(self, source):
        proc, streams = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        steps = of_type(streams[0], "optimizer_step") or of_type(streams[0], "backward_pass")
        return [s["phases"]["samples"] for s in steps if "phases" in s and s.get("optimizer", 0) == 0]

    def test_each_distinct_batch_counts_once_in_a_steps_samples(self):
        gan = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        D, G = torch.nn.Linear(16, 1), torch.nn.Linear(8, 16)
        od, og = torch.optim.SGD(D.parameters(), lr=0.1), torch.optim.SGD(G.parameters(), lr=0.1)
        for (real,) in DataLoader(TensorDataset(torch.randn(64, 16)), batch_size=16):
            od.zero_grad()
            D(real).mean().backward()
            fake = G(torch.randn(16, 8))
            D(fake.detach()).mean().backward()
            od.step()
            og.zero_grad()
            D(fake).mean().backward()
            og.step()
        """
        self.assertEqual(self.samples(gan), [16, 16, 16], "the real batch, once, though D ran thrice")
        closure = """
        import torch
        model = torch.nn.Linear(4, 1)
        x, y = torch.randn(32, 4), torch.randn(32, 1)
        opt = torch.optim.LBFGS(model.parameters(), max_iter=4, tolerance_grad=-1, tolerance_change=-1)
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        for _ in range(3):
            opt.step(closure)
        """
        self.socket_path += "-closure"
        self.assertEqual(self.samples(closure), [32, 32], "one batch, evaluated four times a step")
        accumulated = """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            for _ in range(4):
                model(torch.randn(8, 4)).sum().backward()
            opt.step(); opt.zero_grad()
        """
        self.socket_path += "-accumulated"
        self.assertEqual(self.samples(accumulated), [32, 32], "four fresh micro-batches of 8")

    def test_a_loader_that_fetches_ahead_gives_each_step_its_own_batches(self):
        ahead = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def one_ahead(loader):
            # As accelerate's and Lightning's loaders do, to know which batch is the last.
            batches = iter(loader)
            current = next(batches)
            for upcoming in batches:
                yield current, False
                current = upcoming
            yield current, True

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
        for epoch in range(2):
            for i, ((x,), last) in enumerate(one_ahead(loader)):
                model(x).sum().backward()
                if i % 2 == 1:
                    opt.step(); opt.zero_grad()
        """
        self.assertEqual(self.samples(ahead), [16] * 7, "two micro-batches of 8, also across the epochs' ends")
        two_loaders = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        source = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=8)
        target = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=4)
        for (a,), (b,) in zip(source, target):
            model(torch.cat([a, b])).sum().backward()
            opt.step(); opt.zero_grad()
        """
        self.socket_path += "-two"
        self.assertEqual(self.samples(two_loaders), [12] * 4, "both loaders' batches, in one call")

    def test_a_sequence_first_models_batch_is_its_second_dimension(self):
        source = """
        import torch
        from torch import nn

        class Words(nn.Module):  # tokens as (time, batch), as a word-level language model takes them by default
            def __init__(self, batch_first):
                super().__init__()
                self.embed = nn.Embedding(50, 8)
                self.rnn = nn.LSTM(8, 8, batch_first=batch_first)
                self.out = nn.Linear(8, 50)
            def forward(self, tokens):
                return self.out(self.rnn(self.embed(tokens))[0])

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.attention = nn.MultiheadAttention(8, 2)
            def forward(self, x):
                return self.attention(x, x, x)[0]

        model = MODEL
        for _ in range(3):  # trained by hand: its backward passes are its steps
            inputs = INPUTS
            model.zero_grad()
            model(inputs).sum().backward()
        """
        cases = (("Words(batch_first=False)", "torch.randint(0, 50, (35, 20))"),
                 ("Words(batch_first=True)", "torch.randint(0, 50, (20, 35))"),
                 ("Attention()", "torch.randn(12, 20, 8)"))
        for model, inputs in cases:
            with self.subTest(model):
                self.socket_path += "-x"
                self.assertEqual(self.samples(source.replace("MODEL", model).replace("INPUTS", inputs)), [20, 20])


class TrustTest(Monitored):
    """What the hook may never do to a script: grow it or stall it by looking, shadow its modules; and what it says
    of its own cost and of the times its events stand for."""

    def test_a_profile_that_runs_past_its_time_is_abandoned_said_once_and_never_tried_again(self):
        # Step 2 is profiled (one in 2 from one past a warm-up of 1); its forward pass runs 2.5 s of module calls.
        source = """
        import time, torch
        layer = torch.nn.Linear(4, 4)
        model = torch.nn.Sequential(layer)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(8):
            opt.zero_grad()
            x = model(torch.randn(2, 4))
            if step == 2:
                until = time.perf_counter() + 2.5
                while time.perf_counter() < until:  # few operators: time runs out before memory
                    x = layer(x) * 0.5
                    time.sleep(0.01)
            x.sum().backward()
            opt.step()
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source, GOLOW_OPS_EVERY="2", GOLOW_OPS_WARMUP="1")
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        events = streams[0]
        off = of_type(events, "profiling_off")
        self.assertEqual([e["reason"] for e in off], ["a profiled step ran past 2 s"])
        steps = of_type(events, "optimizer_step")
        self.assertEqual([s["step"] for s in steps if s.get("profiled")], [2], "the abandoned step is not a plain one")
        self.assertEqual(of_type(events, "operators"), [], "nothing of the abandoned profile is kept")

    def test_a_profile_that_grows_the_process_too_much_is_abandoned(self):
        source = """
        import torch
        layer = torch.nn.Linear(4, 4)
        model = torch.nn.Sequential(layer)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(6):
            opt.zero_grad()
            x = model(torch.randn(2, 4))
            if step == 2:
                held = []
                for _ in range(40):  # 400 MB, a module call between each 10 MB
                    held.append(torch.ones(10 << 20, dtype=torch.uint8))
                    x = layer(x)
                del held
            x.sum().backward()
            opt.step()
        print("trained", flush=True)
        """
        proc, streams = self.run_monitored(source, GOLOW_OPS_EVERY="2", GOLOW_OPS_WARMUP="1")
        self.assertEqual((proc.returncode, proc.stdout), (0, "trained\n"), proc.stderr)
        off = of_type(streams[0], "profiling_off")
        self.assertEqual(len(off), 1, streams[0])
        self.assertRegex(off[0]["reason"], r"^a profiled step grew the process by \d+ MiB$")

    def test_a_run_too_short_to_profile_says_why(self):
        proc, streams = self.run_monitored(TRAIN, GOLOW_OPS_EVERY="10", GOLOW_OPS_WARMUP="2")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([e["reason"] for e in of_type(streams[0], "profiling_off")],
                         ["the run ended after 5 steps, before step 7, the first to profile"])

    def test_steps_counted_by_backward_passes_are_profiled_too(self):
        source = """
        import torch
        model = torch.nn.Linear(4, 1)
        for step in range(10):
            model.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-0.01)
        """
        proc, streams = self.run_monitored(source, GOLOW_OPS_EVERY="4", GOLOW_OPS_WARMUP="2")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        passes = of_type(streams[0], "backward_pass")
        self.assertEqual([p["pass"] for p in passes if p.get("profiled")], [4])
        self.assertEqual(sum(w["steps"] for w in of_type(streams[0], "operators")), 1)

    def test_no_module_of_the_users_is_shadowed_by_golows(self):
        mine = os.path.join(self.tmp.name, "mine")
        for name in ("golow", "golow_operators", "golow_step_hook", "sitecustomize_helpers"):
            self.write(f"mine/{name}.py", f"WHO = 'mine: {name}'\n")
        source = TRAIN + textwrap.dedent("""
        import golow, golow_operators, golow_step_hook
        print(golow.WHO, golow_operators.WHO, golow_step_hook.WHO, sep="|")
        """)
        proc, streams = self.run_monitored(source, HOOK_DIR + os.pathsep + mine, GOLOW_OPS_EVERY="2",
                                           GOLOW_OPS_WARMUP="0")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\nmine: golow|mine: golow_operators|mine: golow_step_hook\n")
        self.assertGreater(sum(w["steps"] for w in of_type(streams[0], "operators")), 0, "golow's own still work")

    def test_events_carry_the_time_they_stand_for_and_steps_what_the_hook_took(self):
        before = time.monotonic_ns()
        proc, streams = self.run_monitored(TRAIN)
        after = time.monotonic_ns()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        events = streams[0]
        steps = [e for e in of_type(events, "optimizer_step") if e["optimizer"] == 0]
        stamps = [e["t_ns"] for e in steps]
        self.assertTrue(all(before < t < after for t in stamps), (before, stamps, after))
        self.assertEqual(stamps, sorted(stamps))
        for earlier, later in zip(steps, steps[1:]):
            # A step's interval runs from the one before's end, and the stamp is its end.
            self.assertAlmostEqual((later["t_ns"] - earlier["t_ns"]) / 1e6, later["interval_ms"], delta=0.002)
        passes = of_type(events, "forward_pass")
        self.assertTrue(all(before < p["t_ns"] < stamps[0] for p in passes))
        for step in steps[1:]:
            self.assertGreater(step["phases"]["hook_ms"], 0, step)
            self.assertLess(step["phases"]["hook_ms"], step["interval_ms"], step)


if __name__ == "__main__":
    unittest.main()


# A training loop that loads the hook as `golow attach`'s pending call does (at a bytecode boundary of the main
# thread, between two steps) at each step in ATTACH_AT, and prints, once the hook is gone again, its losses and
# what of the process a hook could leave changed: a run attached to prints what a run never attached to does.
ATTACHED = """
import importlib.machinery, os, sys, time, torch
import torch.nn.modules.module as modules, torch.optim.optimizer as optimizers

hook_file, sockets, attach_at = sys.argv[1], sys.argv[2].split(","), [int(s) for s in sys.argv[3].split(",")]
detach_at = int(sys.argv[4]) if len(sys.argv) > 4 else None  # as `golow attach --detach` asks it
torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(256, 4), torch.randn(256, 1))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
iterator = torch.utils.data.dataloader._BaseDataLoaderIter

def state():
    return {
        "meta_path": [type(f).__qualname__ for f in sys.meta_path],
        "optimiser hooks": (len(optimizers._global_optimizer_pre_hooks), len(optimizers._global_optimizer_post_hooks)),
        "forward hooks": (len(modules._global_forward_pre_hooks), len(modules._global_forward_hooks)),
        "wrapped": [f.__qualname__ for f in (torch.autograd.backward, iterator.__next__, os._exit)
                    if hasattr(f, "__wrapped__")],
        "modules": sorted(name for name in sys.modules if "golow" in name),
        "descriptors": len(os.listdir("/proc/self/fd")),
        "threads": len(os.listdir("/proc/self/task")),
    }

losses = []
for step in range(120):
    if step in attach_at:
        name = "golow-step-hook"
        module = sys.modules.get(name)
        if module is None:
            loader = importlib.machinery.SourceFileLoader(name, hook_file)
            module = type(sys)(name)
            module.__file__, module.__loader__ = hook_file, loader
            sys.modules[name] = module
            loader.exec_module(module)
        print("attached", module.attach(sockets[attach_at.index(step)]), file=sys.stderr, flush=True)
    if step == detach_at:
        sys.modules["golow-step-hook"].uninstall()
    for x, y in torch.utils.data.DataLoader(data, batch_size=64):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    losses.append(round(loss.item(), 6))
    time.sleep(0.01)
deadline = time.monotonic() + 30
while "golow-step-hook" in sys.modules and attach_at != [-1] and time.monotonic() < deadline:
    time.sleep(0.01)
print(losses)
print(state(), flush=True)
"""


class SessionThatLetsGo:
    """One golow attach session's socket: takes the attached process's connection, reads it until `steps` optimiser
    steps were said, then closes it (golow detaching); every event checked against the schema."""

    def __init__(self, path, steps):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(4)
        self.steps, self.events = steps, []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn, conn.makefile("r") as f:
            for line in f:
                self.events.append(event_schema.script_line(line))
                if len(of_type(self.events, "optimizer_step")) >= self.steps:
                    break
        self.server.close()

    def events_when_let_go(self):
        self.thread.join(120)
        return self.events


class AttachTest(Monitored):
    """`golow attach`'s hook: reports from the attach on, and once the session lets go nothing of it is left."""

    def run_attached(self, attach_at, steps=5, detach_at=None):
        script = self.write("train.py", ATTACHED)
        hook_file = os.path.join(HOOK_DIR, "golow-hook", "golow_step_hook.py")
        sessions = [SessionThatLetsGo(os.path.join(self.tmp.name, f"s{i}.sock"), steps) for i in range(len(attach_at))]
        sockets = ",".join(os.path.join(self.tmp.name, f"s{i}.sock") for i in range(len(attach_at)))
        proc = subprocess.run(
            [sys.executable, script, hook_file, sockets or "-", ",".join(map(str, attach_at)) or "-1"]
            + ([str(detach_at)] if detach_at is not None else []),
            capture_output=True, text=True, timeout=300, cwd=self.tmp.name, env=self.env(pythonpath=""))
        return proc, [s.events_when_let_go() for s in sessions]

    def test_an_attached_process_reports_and_is_left_as_it_was(self):
        never, _ = self.run_attached([])
        self.assertEqual(never.returncode, 0, never.stderr)
        attached, [events] = self.run_attached([10])
        self.assertEqual(attached.returncode, 0, attached.stderr)
        self.assertEqual(attached.stderr, "attached True\n")
        self.assertEqual(attached.stdout, never.stdout, "same losses, nothing of the hook left")
        self.assertEqual(events[0]["type"], "script_process")
        steps = of_type(events, "optimizer_step")
        self.assertEqual([s["step"] for s in steps[:5]], list(range(5)), "counted from the attach")
        self.assertEqual([s["phases"]["samples"] for s in steps[1:5]], [64] * 4, "batches taken since the attach")

    def test_a_process_can_be_attached_to_again_after_a_session_let_it_go(self):
        never, _ = self.run_attached([])
        again, sessions = self.run_attached([5, 60])
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stderr, "attached True\nattached True\n")
        self.assertEqual(again.stdout, never.stdout)
        for events in sessions:
            self.assertGreaterEqual(len(of_type(events, "optimizer_step")), 5, events)

    def test_a_process_let_go_while_its_session_holds_on_is_left_as_it_was(self):
        # `golow attach --detach` while the session still reads: the hook's thread, waiting on the open connection,
        # ends too.
        never, _ = self.run_attached([])
        detached, [events] = self.run_attached([10], steps=10 ** 9, detach_at=40)
        self.assertEqual(detached.returncode, 0, detached.stderr)
        self.assertEqual(detached.stdout, never.stdout)
        self.assertGreater(len(of_type(events, "optimizer_step")), 0)

    def test_a_process_that_reports_to_golow_already_is_not_attached_twice(self):
        script = self.write("train.py", ATTACHED)
        hook_file = os.path.join(HOOK_DIR, "golow-hook", "golow_step_hook.py")
        second = os.path.join(self.tmp.name, "second.sock")
        monitor = Monitor(self.socket_path)
        try:
            proc = subprocess.run(
                [sys.executable, script, hook_file, second, "10"], capture_output=True, text=True, timeout=300,
                cwd=self.tmp.name, env=self.env(GOLOW_EVENT_SOCKET=self.socket_path))
        finally:
            streams = monitor.close()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "attached False\n")
        self.assertFalse(os.path.exists(second))
        [events] = streams
        self.assertEqual(len(of_type(events, "optimizer_step")), 120 * 4, "reported once, to its own golow")
