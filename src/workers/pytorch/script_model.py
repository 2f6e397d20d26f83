"""Scripts the session's model once (with the session's initial weights) for the torchscript worker."""

import torch

from golow_common import build_model, session_config


def main():
    cfg = session_config()
    model = build_model(cfg)
    model.train(cfg["mode"] == "train")
    torch.jit.script(model).save(cfg["torchscript"])


if __name__ == "__main__":
    main()
