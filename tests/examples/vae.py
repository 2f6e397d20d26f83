"""The shape of a variational autoencoder: a DataLoader of flattened images, a model that returns a tuple
(reconstruction, mean, log-variance), a loss summed over the batch, Adam, and the running loss summed with
.item() as such scripts do."""

import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from own import Own


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc21 = nn.Linear(64, 8)
        self.fc22 = nn.Linear(64, 8)
        self.fc3 = nn.Linear(8, 64)
        self.fc4 = nn.Linear(64, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main(steps, batch_size):
    torch.manual_seed(1)
    images = torch.rand(steps * batch_size, 1, 28, 28)
    loader = DataLoader(TensorDataset(images, torch.zeros(len(images))), batch_size=batch_size, shuffle=True)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    own = Own()
    model.train()
    train_loss = 0
    waited_from = time.perf_counter()
    for batch_idx, (data, _) in enumerate(loader):
        own.data_waited(time.perf_counter() - waited_from)
        optimizer.zero_grad()
        began = time.perf_counter()
        recon_batch, mu, logvar = model(data)
        own.forward_took(time.perf_counter() - began)
        loss = loss_function(recon_batch, data, mu, logvar)
        began = time.perf_counter()
        loss.backward()
        own.backward_took(time.perf_counter() - began)
        train_loss += loss.item()
        optimizer.step()
        own.step_ended(loss.detach(), len(data))
        waited_from = time.perf_counter()
    print(f"====> Average loss: {train_loss / len(loader.dataset):.4f}", flush=True)
    own.report("vae")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60, 32)
