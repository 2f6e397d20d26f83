"""The shape of a tiny polynomial regression: a fresh random batch each step from a function of its own, one
Linear layer, the update written by hand on .data, until the loss is small."""

import sys
import time

import torch
import torch.nn.functional as F

from own import Own

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


def main(steps, batch_size):
    fc = torch.nn.Linear(W_target.size(0), 1)
    own = Own()
    for batch_idx in range(steps):
        began = time.perf_counter()
        batch_x, batch_y = get_batch(batch_size)
        own.data_waited(time.perf_counter() - began)
        fc.zero_grad()
        began = time.perf_counter()
        prediction = fc(batch_x)
        own.forward_took(time.perf_counter() - began)
        output = F.smooth_l1_loss(prediction, batch_y)
        loss = output.item()
        began = time.perf_counter()
        output.backward()
        own.backward_took(time.perf_counter() - began)
        for param in fc.parameters():
            param.data.add_(-0.01 * param.grad)
        own.step_ended(loss, batch_size)
        time.sleep(0.002)
    print(f"Loss: {loss:.6f} after {steps} batches", flush=True)
    own.report("regression")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, 32)
