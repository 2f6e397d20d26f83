"""The shape of a word-level language model: a corpus batchified into columns (sequence first: (time, batch)),
an LSTM with batch_first=False, truncated backpropagation through time, hidden state carried and detached, and
stochastic gradient descent written by hand (no optimiser), with gradients clipped."""

import sys
import time

import torch
import torch.nn as nn

from own import Own


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        return nn.functional.log_softmax(self.decoder(output), dim=-1).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def main(steps, batch_size, bptt=35):
    torch.manual_seed(1111)
    ntokens = 200
    corpus = torch.randint(0, ntokens, (batch_size * (steps * bptt + 1),))
    train_data = batchify(corpus, batch_size)
    model = RNNModel(ntokens, 32, 32, 2)
    criterion = nn.NLLLoss()
    lr = 20.0
    own = Own()
    model.train()
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        began = time.perf_counter()
        data, targets = get_batch(train_data, i, bptt)
        own.data_waited(time.perf_counter() - began)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        began = time.perf_counter()
        output, hidden = model(data, hidden)
        own.forward_took(time.perf_counter() - began)
        loss = criterion(output, targets)
        began = time.perf_counter()
        loss.backward()
        own.backward_took(time.perf_counter() - began)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        own.step_ended(loss.detach(), data.size(1))
        if batch % 20 == 0:
            print(f"| {batch:5d}/{steps:5d} batches | loss {loss.item():5.2f}", flush=True)
    own.report("seq_rnn")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60, 20)
