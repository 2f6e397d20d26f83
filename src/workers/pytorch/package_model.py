"""Compiles the session's model (with the session's initial weights) ahead of time for the aoti worker:
torch.export, then AOTInductor into a package that libtorch's runtime loads without Python. What that took is
written beside it; the worker reports it as its compile time."""

import json
import os
import time

import torch

from golow_common import apply_gpu_policy, build_model, inductor_cache, session_config


def main():
    cfg = session_config()
    # Inductor's CPU kernels are generated for this many OpenMP threads, as the other levels run with.
    torch.set_num_threads(cfg["threads"])
    apply_gpu_policy(cfg)
    device = torch.device(cfg["device"])
    model = build_model(cfg).to(device).eval()
    example = torch.zeros(cfg["batch_size"], cfg["channels"], cfg["resolution"], cfg["resolution"], device=device)
    began = time.perf_counter_ns()
    with torch.no_grad():
        exported = torch.export.export(model, (example,))
        torch._inductor.aoti_compile_and_package(exported, package_path=cfg["aoti"]["package"])
    ended = time.perf_counter_ns()
    hits, misses = inductor_cache()
    report = dict(ms=(ended - began) / 1e6, cache_hits=hits, cache_misses=misses)
    path = cfg["aoti"]["packaging"]
    with open(path + ".part", "w") as f:
        json.dump(report, f)
    os.replace(path + ".part", path)


if __name__ == "__main__":
    main()
