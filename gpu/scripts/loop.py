"""A plain PyTorch training loop in the shape of pytorch/examples' imagenet/main.py: a DataLoader with worker
processes and pinned memory, batches moved to the GPU with non_blocking, SGD with momentum, cuDNN's benchmark on, and
the loss read back to the host (.item()) only on the steps it prints."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from model import small_resnet, synthetic_images


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--print-freq", type=int, default=20)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = small_resnet().to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
    loader = DataLoader(synthetic_images(args.steps * args.batch_size), batch_size=args.batch_size, shuffle=True,
                        num_workers=2, pin_memory=device.type == "cuda")
    model.train()
    for i, (images, target) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % args.print_freq == 0:
            print(f"[{i}/{len(loader)}] loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
