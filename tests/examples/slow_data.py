"""The shape of a script waiting on its data: a Dataset whose __getitem__ takes 2 ms (a decode, a transform), 16
samples a batch, loaded in the training process (num_workers=0), a small model that computes in far less."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(64), i % 4


def main(steps, batch_size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in DataLoader(Slow(steps * batch_size), batch_size=batch_size, num_workers=0):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 80, 16)
