"""Scripts the session's model once (with the session's initial weights) for the torchscript worker."""

import argparse
import json

import torch

from golow_common import build_model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    model = build_model(cfg)
    model.train(cfg["mode"] == "train")
    torch.jit.script(model).save(cfg["torchscript"])


if __name__ == "__main__":
    main()
