"""The shape of a DCGAN: a DataLoader of real images, a generator and a discriminator each with its own Adam,
the discriminator run three times an iteration (on real images, on fakes detached, on fakes for the generator's
loss), its loss the sum of its two backward passes'."""

import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from own import Own

nz, ngf, ndf = 16, 8, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main(steps, batch_size):
    torch.manual_seed(999)
    images = torch.rand(steps * batch_size, 3, 16, 16) * 2 - 1
    dataloader = DataLoader(TensorDataset(images), batch_size=batch_size, shuffle=True)
    netD, netG = Discriminator(), Generator()
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    own = Own()
    waited_from = time.perf_counter()
    for i, data in enumerate(dataloader, 0):
        own.data_waited(time.perf_counter() - waited_from)
        netD.zero_grad()
        real_cpu = data[0]
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), 1.0)
        began = time.perf_counter()
        output = netD(real_cpu)
        own.forward_took(time.perf_counter() - began)
        errD_real = criterion(output, label)
        began = time.perf_counter()
        errD_real.backward()
        own.backward_took(time.perf_counter() - began)
        noise = torch.randn(b_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(0.0)
        began = time.perf_counter()
        output = netD(fake.detach())
        own.forward_took(time.perf_counter() - began)
        errD_fake = criterion(output, label)
        began = time.perf_counter()
        errD_fake.backward()
        own.backward_took(time.perf_counter() - began)
        errD = errD_real + errD_fake
        optimizerD.step()
        own.step_ended(errD.detach(), b_size)
        # The generator's turn: the discriminator's third pass, and its backward pass, fall in the next step of the
        # discriminator's optimiser, as golow counts them.
        netG.zero_grad()
        label.fill_(1.0)
        began = time.perf_counter()
        output = netD(fake)
        own.forward_took(time.perf_counter() - began)
        errG = criterion(output, label)
        began = time.perf_counter()
        errG.backward()
        own.backward_took(time.perf_counter() - began)
        optimizerG.step()
        if i % 20 == 0:
            print(f"[{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f}", flush=True)
        waited_from = time.perf_counter()
    own.report("gan")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60, 16)
