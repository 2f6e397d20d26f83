"""The wheel as a user meets it (`make wheel-check`, part of `make test`).

A fresh virtual environment gets torch 2.11 (from pip's cache after `make build`) and nothing of this checkout; the
wheel is installed into it, timed; then, from a directory outside the checkout and with only the environment's
`bin/` put first on PATH (as activating it does), golow checks itself, watches a user's script live in a real
terminal (tmux), measures it headless, and runs the pytorch and libtorch levels. Their summaries are read and checked.
Before any of that, the wheel's own files are checked: its size, `golow` linking no torch library, and golow-worker
needing no torch library beyond those golow points it at and naming no directory of the machine that built it.

Usage: check.py WHEEL [--python PYTHON] [--keep DIR]
"""

import argparse
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[2]
# ruff's and uv's wheels, Rust binaries too, are 10 to 20 MB; golow's has five binaries.
MAX_WHEEL_BYTES = 16 << 20
# What `make build` installs, so that pip takes it from its cache.
TORCH = ["torch==2.11.0", "numpy==2.4.6"]
# A user's own script: a tiny model trained for a few seconds, printing its step count at the end.
SCRIPT = """
import time
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
inputs, labels = torch.randn(32, 64), torch.randint(0, 10, (32,))
steps = int(__import__("sys").argv[1])
for step in range(steps):
    optimiser.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    loss.backward()
    optimiser.step()
    time.sleep(0.02)
print(f"trained {steps} steps")
"""


def fail(message):
    sys.exit(f"wheel-check: {message}")


def run(argv, cwd, env, timeout=300):
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        fail(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def elf_dynamic(path):
    """(NEEDED libraries, RUNPATH and RPATH entries) of an ELF file, as readelf reads them."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+?)\]", out)
    paths = re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.+?)\]", out)
    return needed, paths


def worker_torch_libraries():
    """The torch libraries golow points an installed golow-worker at (src/session/programs.rs)."""
    source = (REPO / "src" / "session" / "programs.rs").read_text()
    block = re.search(r"WORKER_TORCH_LIBRARIES: \[&str; \d+\] = \[(.*?)\];", source, re.S)
    if not block:
        fail("src/session/programs.rs no longer declares WORKER_TORCH_LIBRARIES")
    return set(re.findall(r'"([^"]+)"', block.group(1)))


def check_files(wheel, scratch):
    size = wheel.stat().st_size
    if size > MAX_WHEEL_BYTES:
        fail(f"{wheel.name} is {size} bytes, above {MAX_WHEEL_BYTES}")
    unpacked = scratch / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    data = next(unpacked.glob("golow-*.data"))
    golow = data / "scripts" / "golow"
    needed, paths = elf_dynamic(golow)
    torch_like = [lib for lib in needed if "torch" in lib or lib.startswith("libc10")]
    if torch_like or paths:
        fail(f"the wheel's golow links {torch_like} with search paths {paths}: it must link no torch")
    worker = data / "data" / "lib" / "golow" / "golow-worker"
    needed, paths = elf_dynamic(worker)
    if paths:
        fail(f"the wheel's golow-worker names directories of the machine that built it: {paths}")
    expected = worker_torch_libraries()
    torch_needed = {lib for lib in needed if "torch" in lib or lib.startswith("libc10")}
    if torch_needed != expected:
        fail(f"golow-worker needs torch's {sorted(torch_needed)}; golow points it at {sorted(expected)}")
    print(f"wheel: {wheel.name}, {size / 1e6:.1f} MB; golow links no torch; golow-worker needs {sorted(expected)}")


def fresh_environment(scratch, python):
    venv = scratch / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    started = time.monotonic()
    run([venv / "bin" / "pip", "install", "--quiet", *TORCH], cwd=scratch, env=os.environ.copy(), timeout=1200)
    print(f"a fresh environment with {' '.join(TORCH)}: {time.monotonic() - started:.0f} s (pip's cache)")
    return venv


def user_env(venv):
    """The environment of a user who activated `venv`: nothing of golow's build, nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOLOW_", "PYTHON", "LIBTORCH", "LD_"))}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def summary(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        fail(f"no summary at {path}: {e}")


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def live_view(home, env, started):
    """Watches the script live in a real terminal; returns seconds from `started` until its steps show."""
    session = f"golow-wheel-{os.getpid()}"
    # The shell tmux starts reads its profile: the environment is set in the command itself.
    command = (f"export PATH={shlex.quote(env['PATH'])} VIRTUAL_ENV={shlex.quote(env['VIRTUAL_ENV'])}; "
               f"cd {shlex.quote(str(home))} && golow run --cmd 'python train.py 400' --no-record")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            screen = tmux("capture-pane", "-p", "-t", session)
            steps = re.search(r"● train (\d+) steps", screen)
            if steps and int(steps.group(1)) > 0:
                return time.monotonic() - started
            if time.monotonic() > deadline:
                fail(f"the live view showed no step of the script in 120 s; screen:\n{screen}")
            time.sleep(0.2)
    finally:
        tmux("send-keys", "-t", session, "q")
        time.sleep(1)
        tmux("kill-session", "-t", session)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=pathlib.Path)
    parser.add_argument("--keep", type=pathlib.Path, help="build the environment here and keep it")
    parser.add_argument("--python", default="python3", help="the python the fresh environment is made from")
    args = parser.parse_args()
    scratch = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="golow-wheel-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        check_files(args.wheel.resolve(), scratch)
        venv = scratch / "venv"
        if not (venv / "bin" / "python").exists():
            venv = fresh_environment(scratch, args.python)
        home = scratch / "home"
        home.mkdir(exist_ok=True)
        (home / "train.py").write_text(SCRIPT)
        env = user_env(venv)

        started = time.monotonic()
        run([venv / "bin" / "pip", "install", "--quiet", "--force-reinstall", "--no-deps", args.wheel.resolve()],
            cwd=home, env=env)
        installed = time.monotonic() - started
        first_view = live_view(home, env, started)
        print(f"pip install of the wheel: {installed:.1f} s; from the install to the script's steps in the live "
              f"view: {first_view:.1f} s")

        doctor = run(["golow", "doctor"], cwd=home, env=env)
        for expected in (f"python: {venv / 'bin' / 'python3'} (torch 2.11.0", f"golow-worker: ", "libtorch 2.11.0"):
            if expected not in doctor:
                fail(f"golow doctor does not say {expected!r}:\n{doctor}")
        if str(REPO) in doctor:
            fail(f"golow doctor names the checkout {REPO}:\n{doctor}")

        run(["golow", "run", "--headless", "--cmd", "python train.py 30", "--summary-json", "script.json",
             "--record", "script.golow"], cwd=home, env=env)
        script = summary(home / "script.json")
        workers = script.get("workers", [])
        if len(workers) != 1 or workers[0].get("steps") != 30:
            fail(f"the --cmd summary does not count the script's 30 steps: {json.dumps(workers)[:2000]}")

        run(["golow", "run", "--headless", "--impl", "pytorch,libtorch", "--steps", "5", "--resolution", "32",
             "--batch-size", "4", "--summary-json", "levels.json", "--no-record"], cwd=home, env=env, timeout=600)
        levels = summary(home / "levels.json")
        counted = {w.get("impl"): w.get("steps") for w in levels.get("workers", [])}
        if counted != {"pytorch": 5, "libtorch": 5}:
            fail(f"--impl pytorch,libtorch did not run 5 steps each: {counted}")

        outside = run([venv / "bin" / "python", "-c", "import golow; golow.phase('x'); golow.report(loss=1.0); "
                       "print(golow.__file__)"], cwd=home, env=env)
        if not outside.strip().startswith(str(venv)):
            fail(f"import golow outside a session came from {outside.strip()}, not the environment")
        print("golow doctor, a live and a headless --cmd script, and --impl pytorch,libtorch ran from the wheel")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
