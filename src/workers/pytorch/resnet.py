"""ResNet exactly as torchvision lays it out (v1.5: stride on the 3x3 convolution), so that parameter
names match golow's Rust definition and one weights file serves every implementation. Scriptable."""

from typing import List, Optional

import torch
from torch import nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in: int, width: int, stride: int, downsample: Optional[nn.Module]):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int, downsample: Optional[nn.Module]):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 1, 1, 0, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, 1, 0, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, depths: List[int], channels: int, classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in = 64
        layers = []
        for i, depth in enumerate(depths):
            width = 64 << i
            blocks = []
            for b in range(depth):
                stride = 2 if i > 0 and b == 0 else 1
                downsample = None
                if stride != 1 or c_in != width * block.expansion:
                    downsample = nn.Sequential(
                        nn.Conv2d(c_in, width * block.expansion, 1, stride, 0, bias=False),
                        nn.BatchNorm2d(width * block.expansion),
                    )
                blocks.append(block(c_in, width, stride, downsample))
                c_in = width * block.expansion
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(model: str, channels: int, classes: int) -> ResNet:
    if model == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3], channels, classes)
    if model == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2], channels, classes)
    raise ValueError(f"unknown model {model!r}")
