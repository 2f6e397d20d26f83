"""The shape of a small CNN trained on images: a DataLoader, Adadelta, a learning-rate schedule, a log line now
and then (the script reads its loss with .item() only when it logs)."""

import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from own import Own


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout(x), 1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def main(steps, batch_size):
    torch.manual_seed(1)
    images = torch.randn(steps * batch_size, 1, 28, 28)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long() + 2 * (images[:, 0, 0, 0] > 0).long()
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    own = Own()
    model.train()
    waited_from = time.perf_counter()
    for batch_idx, (data, target) in enumerate(loader):
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
        if batch_idx % 20 == 0:
            print(f"Train [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}", flush=True)
        waited_from = time.perf_counter()
    scheduler.step()
    own.report("cnn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60, 32)
