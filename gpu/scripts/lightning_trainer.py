"""A Lightning `Trainer` fitting a LightningModule, as Lightning's own examples do: the module says its training
step and optimiser, the Trainer moves each batch to the GPU, steps and logs (the loss stays on the device)."""

import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from model import small_resnet, synthetic_images


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = small_resnet()

    def training_step(self, batch, batch_idx):
        images, target = batch
        loss = F.cross_entropy(self.model(images), target)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    L.seed_everything(0)
    loader = DataLoader(synthetic_images(args.steps * args.batch_size), batch_size=args.batch_size, shuffle=True)
    trainer = L.Trainer(max_steps=args.steps, accelerator="auto", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Classifier(), loader)
    print(f"trained {trainer.global_step} steps, last loss {trainer.callback_metrics['train_loss'].item():.4f}")


if __name__ == "__main__":
    main()
