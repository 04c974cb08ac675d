"""Exact-mode modules for tests/cli/script_executor_test.cpp, as a requestor writes them, and the
data they train on: digits 8x8 scaled to 32x32 RGB images, and the same digits as sequences of 8
rows of 8 pixels. Usage: requestor_modules.py OUTDIR SCRIPTS_DIR (scripts/, for make_digits)."""
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
out = sys.argv[1]
torch.manual_seed(0)

class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 5); self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(16 * 5 * 5, 120); self.f2 = nn.Linear(120, 84); self.f3 = nn.Linear(84, 10)
    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2); x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.f3(torch.tanh(self.f2(torch.tanh(self.f1(x.flatten(1))))))

class Gates(nn.Module):
    """sigmoid, silu, max_pool2d and softmax."""
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1); self.fc = nn.Linear(8 * 16 * 16, 10)
    def forward(self, x):
        h = F.max_pool2d(F.silu(self.c(x)), 2)
        h = h * torch.sigmoid(h) * torch.softmax(h.flatten(2), -1).view_as(h)
        return self.fc(h.flatten(1))

class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 24, batch_first=True); self.fc = nn.Linear(24, 10)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(self.enc(self.inp(x)).mean(1))

for name, m in [("lenet", LeNet()), ("gates", Gates()), ("lstm", Lstm()), ("encoder", Encoder())]:
    torch.jit.script(m).save("%s/%s.pt" % (out, name))

d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:256]
targets = d.target.astype(np.int64)[:256]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
for name, inputs in [("images", images), ("rows", pixels)]:
    with open("%s/%s.safetensors" % (out, name), "wb") as f:
        f.write(safetensors_bytes({"inputs": ("F32", inputs), "targets": ("I64", targets)}))
