"""Exact-mode modules for tests/cli/script_executor_test.cpp, as a requestor writes them, and the
data they train on: digits 8x8 scaled to 32x32 RGB images, and the same digits as sequences of 8
rows of 8 pixels. Usage: requestor_modules.py OUTDIR SCRIPTS_DIR (scripts/, for make_digits and
requestor_nets)."""
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
from requestor_nets import Encoder, Gates, LeNet, Lstm
out = sys.argv[1]
torch.manual_seed(0)

for name, m in [("lenet", LeNet()), ("gates", Gates()), ("lstm", Lstm(8, 24)),
                ("encoder", Encoder(8))]:
    torch.jit.script(m).save("%s/%s.pt" % (out, name))

d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:256]
targets = d.target.astype(np.int64)[:256]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
for name, inputs in [("images", images), ("rows", pixels)]:
    with open("%s/%s.safetensors" % (out, name), "wb") as f:
        f.write(safetensors_bytes({"inputs": ("F32", inputs), "targets": ("I64", targets)}))
