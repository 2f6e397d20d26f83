"""Tests for golow's PYTHONPATH hook (hook/sitecustomize.py + hook/golow_step_hook.py).

Run with the venv that has torch:
    /work/main/.venv/bin/python -m unittest /work/scratch-hook/test_hook.py -v
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

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

NO_TORCH = """
import json, sys
print("torch" in sys.modules, flush=True)
"""


class HookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def env(self, pythonpath=HOOK_DIR, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GOLOW_EVENT_FD")}
        env["PYTHONPATH"] = pythonpath
        env.update(extra)
        return env

    def run_monitored(self, source, pythonpath=HOOK_DIR):
        """Run a script the way golow does; return (process, events)."""
        script = self.write("script.py", source)
        r, w = os.pipe()
        try:
            proc = subprocess.run(
                [sys.executable, script], capture_output=True, text=True,
                timeout=300, pass_fds=(w,),
                env=self.env(pythonpath, GOLOW_EVENT_FD=str(w)))
        finally:
            os.close(w)  # so that reading the pipe ends at EOF
        with os.fdopen(r) as f:
            raw = f.read()
        self.assertTrue(raw == "" or raw.endswith("\n"), raw)
        return proc, [json.loads(line) for line in raw.splitlines()]

    def assert_steps(self, events, n):
        self.assertEqual([e["step"] for e in events], list(range(n)))
        for i, e in enumerate(events):
            self.assertEqual(set(e), {"type", "step", "interval_ms"})
            self.assertEqual(e["type"], "optimizer_step")
            if i == 0:
                self.assertIsNone(e["interval_ms"])
            else:
                self.assertIsInstance(e["interval_ms"], (int, float))
                self.assertGreaterEqual(e["interval_ms"], 0)

    def test_events_for_every_optimiser_step(self):
        proc, events = self.run_monitored(TRAIN)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assertEqual(proc.stderr, "")
        self.assert_steps(events, 7)

    def test_events_are_compact_json_lines(self):
        script = self.write("script.py", TRAIN)
        r, w = os.pipe()
        subprocess.run([sys.executable, script], capture_output=True, timeout=300,
                       pass_fds=(w,), env=self.env(GOLOW_EVENT_FD=str(w)), check=True)
        os.close(w)
        with os.fdopen(r) as f:
            first = f.readline()
        self.assertEqual(first, '{"type":"optimizer_step","step":0,"interval_ms":null}\n')

    def test_without_event_fd_is_silent(self):
        script = self.write("script.py", TRAIN)
        proc = subprocess.run([sys.executable, script], capture_output=True,
                              text=True, timeout=300, env=self.env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assertEqual(proc.stderr, "")

    def test_invalid_event_fd_is_silent(self):
        script = self.write("script.py", TRAIN)
        r, w = os.pipe()
        self.addCleanup(os.close, w)
        self.addCleanup(os.close, r)
        # closed fd, garbage, negative, and a read-only fd
        for value, fds in (("97", ()), ("three", ()), ("-1", ()), (str(r), (r,))):
            with self.subTest(fd=value):
                proc = subprocess.run(
                    [sys.executable, script], capture_output=True, text=True,
                    timeout=300, pass_fds=fds, env=self.env(GOLOW_EVENT_FD=value))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout, "trained\n")
                self.assertEqual(proc.stderr, "")

    def test_monitor_going_away_does_not_break_the_script(self):
        # Enough steps to overflow the pipe buffer, so writes surely hit the
        # closed read end; also with SIGPIPE back at its default (fatal) action.
        many = TRAIN.replace("run(torch.optim.SGD(model.parameters(), lr=0.1), 5)",
                             "run(torch.optim.SGD(model.parameters(), lr=0.1), 3000)")
        for sigpipe in ("", "import signal; signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"):
            with self.subTest(sigpipe_default=bool(sigpipe)):
                script = self.write("script.py", sigpipe + many)
                r, w = os.pipe()
                proc = subprocess.Popen(
                    [sys.executable, script], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, pass_fds=(w,),
                    env=self.env(GOLOW_EVENT_FD=str(w)))
                os.close(w)
                with os.fdopen(r) as f:
                    self.assertIn("optimizer_step", f.readline())
                out, err = proc.communicate(timeout=300)
                self.assertEqual(proc.returncode, 0, err)
                self.assertEqual(out, "trained\n")
                self.assertEqual(err, "")

    def test_reused_fd_number_is_not_written_to(self):
        # The script closes golow's fd and a file of its own gets the number.
        r, w = os.pipe()
        os.close(r)
        script = self.write("script.py", textwrap.dedent(f"""
        import os
        os.dup2(os.open("data.txt", os.O_WRONLY | os.O_CREAT), {w})
        f = open({w}, "w")
        """) + TRAIN + textwrap.dedent("""
        f.close()
        print(repr(open("data.txt").read()))
        """))
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                              timeout=300, pass_fds=(w,), cwd=self.tmp.name,
                              env=self.env(GOLOW_EVENT_FD=str(w)))
        os.close(w)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n''\n")

    def test_forked_children_do_not_emit(self):
        proc, events = self.run_monitored(FORK)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "child status 0\n")
        self.assert_steps(events, 2)

    def test_subprocesses_do_not_inherit_the_event_fd(self):
        # The script's own subprocesses must not see GOLOW_EVENT_FD (their fd
        # with that number may be something else entirely).
        source = """
        import os, subprocess, sys
        print(os.environ.get("GOLOW_EVENT_FD"))
        subprocess.run([sys.executable, "-c",
                        "import os; print(os.environ.get('GOLOW_EVENT_FD'))"])
        """
        proc, events = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "None\nNone\n")
        self.assertEqual(events, [])

    def test_users_sitecustomize_still_runs(self):
        other = os.path.join(self.tmp.name, "usersite")
        self.write("usersite/sitecustomize.py", """
        import sys
        print("USER_SITECUSTOMIZE", __name__, flush=True)
        sys.user_site_marker = True
        """)
        source = TRAIN + "import sys; print(sys.user_site_marker)\n"
        proc, events = self.run_monitored(source, HOOK_DIR + os.pathsep + other)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "USER_SITECUSTOMIZE sitecustomize\ntrained\nTrue\n")
        self.assert_steps(events, 7)

        # and without golow's event fd too
        script = self.write("script.py", source)
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                              timeout=300, env=self.env(HOOK_DIR + os.pathsep + other))
        self.assertEqual(proc.stdout, "USER_SITECUSTOMIZE sitecustomize\ntrained\nTrue\n")

    def test_error_in_users_sitecustomize_is_reported_as_without_golow(self):
        other = os.path.join(self.tmp.name, "usersite")
        self.write("usersite/sitecustomize.py", "raise RuntimeError('user bug')\n")
        proc, events = self.run_monitored(TRAIN, HOOK_DIR + os.pathsep + other)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assertIn("RuntimeError: user bug", proc.stderr)
        self.assert_steps(events, 7)

    def test_script_without_torch_does_not_import_it(self):
        proc, events = self.run_monitored(NO_TORCH)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "False\n")
        self.assertEqual(proc.stderr, "")
        self.assertEqual(events, [])

    def test_torch_imported_before_install(self):
        # E.g. a .pth file imported torch before sitecustomize ran.
        source = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {HOOK_DIR!r})
        import golow_step_hook
        golow_step_hook.install()
        """) + TRAIN
        script = self.write("script.py", source)
        r, w = os.pipe()
        proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                              timeout=300, pass_fds=(w,),
                              env=self.env("", GOLOW_EVENT_FD=str(w)))
        os.close(w)
        with os.fdopen(r) as f:
            events = [json.loads(line) for line in f]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "trained\n")
        self.assert_steps(events, 7)

    def test_wrapper_loader_leaves_no_trace(self):
        source = """
        import torch.optim.optimizer as m
        print(type(m.__loader__).__name__, m.__spec__.loader is m.__loader__)
        print(any(type(f).__name__ == "_Finder" for f in __import__("sys").meta_path))
        """
        proc, events = self.run_monitored(source)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "SourceFileLoader True\nFalse\n")


if __name__ == "__main__":
    unittest.main()
