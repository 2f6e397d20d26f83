"""The shape of a sequence-prediction script trained with L-BFGS: two LSTMCells unrolled over every time step of
a long sine wave in double precision, a closure that computes the loss and its gradients, evaluated up to 20 times
in each optimiser step, printing the loss at every evaluation."""

import sys
import time

import numpy as np
import torch
import torch.nn as nn

from own import Own


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 16)
        self.lstm2 = nn.LSTMCell(16, 16)
        self.linear = nn.Linear(16, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 16, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 16, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            outputs += [self.linear(h_t2)]
        return torch.cat(outputs, dim=1)


def main(steps, length):
    np.random.seed(2)
    torch.manual_seed(0)
    x = np.empty((100, length), "int64")
    x[:] = np.array(range(length)) + np.random.randint(-4 * 20, 4 * 20, 100).reshape(100, 1)
    data = np.sin(x / 1.0 / 20).astype("float64")
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    seq = Sequence().double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    own = Own()
    for i in range(steps):
        evaluations = []

        def closure():
            optimizer.zero_grad()
            began = time.perf_counter()
            out = seq(input)
            own.forward_took(time.perf_counter() - began)
            loss = criterion(out, target)
            print("loss:", loss.item(), flush=True)
            evaluations.append(loss.item())
            began = time.perf_counter()
            loss.backward()
            own.backward_took(time.perf_counter() - began)
            return loss

        first = optimizer.step(closure)
        own.step_ended(first.detach(), input.size(0))
        print(f"STEP {i} evaluations {len(evaluations)}", flush=True)
    own.report("lbfgs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, int(sys.argv[2]) if len(sys.argv) > 2 else 200)
