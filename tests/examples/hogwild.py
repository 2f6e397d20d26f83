"""The shape of Hogwild training: one model in shared memory, several processes started with
torch.multiprocessing, each with its own DataLoader and SGD, updating the shared parameters without locks."""

import sys
import time

import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from own import Own


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 5)
        self.fc1 = nn.Linear(4 * 12 * 12, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        return F.log_softmax(self.fc1(x.flatten(1)), dim=1)


def train(rank, model, steps, batch_size):
    torch.manual_seed(1 + rank)
    torch.set_num_threads(1)
    images = torch.randn(steps * batch_size, 1, 28, 28)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True, num_workers=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    own = Own()
    model.train()
    waited_from = time.perf_counter()
    for data, target in loader:
        own.data_waited(time.perf_counter() - waited_from)
        optimizer.zero_grad()
        began = time.perf_counter()
        output = model(data)
        own.forward_took(time.perf_counter() - began)
        loss = F.nll_loss(output, target)
        began = time.perf_counter()
        loss.backward()
        own.backward_took(time.perf_counter() - began)
        optimizer.step()
        own.step_ended(loss.detach(), len(data))
        waited_from = time.perf_counter()
    own.report(f"hogwild-{rank}")


def main(processes, steps, batch_size):
    model = Net()
    model.share_memory()
    workers = []
    for rank in range(processes):
        p = mp.Process(target=train, args=(rank, model, steps, batch_size))
        p.start()
        workers.append(p)
    for p in workers:
        p.join()


if __name__ == "__main__":
    main(2, int(sys.argv[1]) if len(sys.argv) > 1 else 60, 16)
