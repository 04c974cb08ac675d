"""Modules as requestors write them with torch.nn, shared by the tests that script them
(tests/cli/requestor_modules.py, tests/cli/real_models.py) and the benches that time them
(bench/script_executor.py, bench_portable's scripted models). Each classifies into 10 classes."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    """tanh and avg_pool2d on [B, 3, 32, 32] images."""
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 5); self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(16 * 5 * 5, 120); self.f2 = nn.Linear(120, 84); self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2); x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.f3(torch.tanh(self.f2(torch.tanh(self.f1(x.flatten(1))))))


class Gates(nn.Module):
    """sigmoid, silu, max_pool2d and softmax on [B, 3, 32, 32] images."""
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1); self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        h = F.max_pool2d(F.silu(self.c(x)), 2)
        h = h * torch.sigmoid(h) * torch.softmax(h.flatten(2), -1).view_as(h)
        return self.fc(h.flatten(1))


class Lstm(nn.Module):
    """An LSTM over [B, steps, features], classified from its last step."""
    def __init__(self, features, hidden, layers=1, bidirectional=False):
        super().__init__()
        self.rnn = nn.LSTM(features, hidden, num_layers=layers, batch_first=True,
                           bidirectional=bidirectional)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class Encoder(nn.Module):
    """A TransformerEncoder (2 layers, d 32, 4 heads, dropout 0.1) over [B, steps, features],
    classified from the mean over steps; `features` None: the steps are already 32 wide."""
    def __init__(self, features=None):
        super().__init__()
        self.inp = nn.Linear(features, 32) if features is not None else nn.Identity()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2); self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.enc(self.inp(x)).mean(1))
