//! Training scripts in the two frameworks people train with most, each stepping its optimiser its own way
//! (Lightning inside a closure, Hugging Face through accelerate's wrapper), with gradient accumulation: two
//! micro-batches a step. Each prints its optimiser steps at the end.

/// Lightning: 2 epochs of 40 batches of 16, a `__getitem__` of 1 ms.
pub const LIGHTNING: &str = "\
import time, torch, lightning as L
from torch.utils.data import DataLoader, TensorDataset

class Slow(TensorDataset):
    def __getitem__(self, i):
        time.sleep(0.001)
        return super().__getitem__(i)

class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        self.losses = []
    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.losses.append(loss.item())
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

torch.manual_seed(0)
data = Slow(torch.randn(640, 32), torch.randint(0, 4, (640,)))
net = Net()
trainer = L.Trainer(max_epochs=2, accelerator='cpu', accumulate_grad_batches=2, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(net, DataLoader(data, batch_size=16))
print('optimizer steps', trainer.global_step, flush=True)
print('last loss', net.losses[-1], flush=True)
";

/// Hugging Face: a tiny BERT, 2 epochs of 32 batches of 8.
pub const HUGGING_FACE: &str = "\
import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

class Toy(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {'input_ids': torch.randint(0, 100, (16,), generator=g), 'labels': torch.tensor(i % 2)}

class Told(Trainer):
    def log(self, logs, *args, **kwargs):
        if 'loss' in logs:
            print('logged loss', logs['loss'], flush=True)
        super().log(logs, *args, **kwargs)

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32)
args = TrainingArguments(output_dir='out', per_device_train_batch_size=8, gradient_accumulation_steps=2,
                         num_train_epochs=2, logging_steps=4, report_to=[], save_strategy='no', use_cpu=True,
                         disable_tqdm=True)
trainer = Told(model=BertForSequenceClassification(config), args=args, train_dataset=Toy())
trainer.train()
print('optimizer steps', trainer.state.global_step, flush=True)
";
