"""The shape of an RNN that reads images row by row: an LSTM with batch_first=True over (batch, rows, columns),
a DataLoader, Adadelta, and a loss read with .item() for the log."""

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
        self.rnn = nn.LSTM(input_size=28, hidden_size=32, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, input):
        input = input.reshape(-1, 28, 28)
        output, hidden = self.rnn(input)
        output = self.batchnorm(output[:, -1, :])
        return F.log_softmax(self.fc(output), dim=1)


def main(steps, batch_size):
    torch.manual_seed(1)
    images = torch.randn(steps * batch_size, 1, 28, 28)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=0.1)
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
    own.report("batch_rnn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60, 32)
