"""A small ResNet for the kit's own training scripts: two residual stages over 64 px images, ten classes."""

import torch
import torch.nn as nn
from torch.utils.data import TensorDataset


class Block(nn.Module):
    def __init__(self, channels_in, channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def small_resnet(classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        Block(32, 64, 2), Block(64, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def synthetic_images(count, resolution=64, classes=10, seed=0):
    """Random images whose class is readable from their mean colour, so that the loss falls."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (count,), generator=generator)
    images = torch.randn(count, 3, resolution, resolution, generator=generator) + labels.view(-1, 1, 1, 1) / classes
    return TensorDataset(images, labels)
