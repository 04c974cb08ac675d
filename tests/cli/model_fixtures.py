"""Real data and TorchScript modules for the model tests, written by Python torch (1.13) at test
time: sklearn's digits as MNIST idx files and CIFAR-10 batches, and scripted modules, some of
them broken on purpose. Usage: model_fixtures.py OUTDIR"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

out = sys.argv[1]
torch.manual_seed(0)


def write(path, data):
    with open(os.path.join(out, path), "wb") as f:
        f.write(data)


def digits_as_files():
    d = load_digits()
    images = np.clip(d.images * 16, 0, 255).astype(np.uint8)  # 0..16 -> 0..255
    n = len(images)
    os.makedirs(os.path.join(out, "mnist"), exist_ok=True)
    mnist = np.zeros((n, 28, 28), np.uint8)
    mnist[:, 2:26, 2:26] = np.kron(images, np.ones((3, 3), np.uint8))
    write("mnist/train-images-idx3-ubyte", struct.pack(">IIII", 2051, n, 28, 28) + mnist.tobytes())
    write("mnist/train-labels-idx1-ubyte", struct.pack(">II", 2049, n) + d.target.astype(np.uint8).tobytes())
    os.makedirs(os.path.join(out, "cifar"), exist_ok=True)
    rgb = np.kron(images, np.ones((4, 4), np.uint8))[:, None].repeat(3, axis=1)  # n,3,32,32
    records = np.concatenate([d.target.astype(np.uint8)[:, None], rgb.reshape(n, -1)], axis=1)
    write("cifar/data_batch_1.bin", records.tobytes())


class Classifier(nn.Module):
    """A classifier with buffers (BatchNorm) so that exports carry more than parameters."""

    def __init__(self, inputs: int, classes: int):
        super().__init__()
        self.fc1 = nn.Linear(inputs, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x.flatten(1)))))


class Counter(nn.Module):
    """Keeps a Python int that forward() changes: state outside the snapshot."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * float(self.calls % 2 + 1)


class SmoothedLoss(nn.Module):
    """forward(inputs, targets) -> scalar: dropout and a label-smoothed loss inside the module."""

    def __init__(self, inputs: int = 32, classes: int = 4):
        super().__init__()
        self.fc1 = nn.Linear(inputs, 32)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, classes)
        self.smoothing: float = 0.1

    def forward(self, x, y):
        logits = self.fc2(self.drop(F.relu(self.fc1(x))))
        logp = F.log_softmax(logits, dim=1)
        nll = -logp.gather(1, y.unsqueeze(1)).squeeze(1)
        return ((1.0 - self.smoothing) * nll - self.smoothing * logp.mean(dim=1)).mean()


def save(module, name):
    torch.jit.script(module).save(os.path.join(out, name))


digits_as_files()
save(Classifier(32, 4), "ts_synthetic.pt")
save(Classifier(784, 10), "ts_mnist.pt")
save(Classifier(3072, 10), "ts_cifar10.pt")
save(nn.Linear(10, 4), "wrong_shape.pt")
save(Counter(), "counter.pt")
save(SmoothedLoss(), "model_loss.pt")
save(SmoothedLoss(64, 10), "digits_loss.pt")  # for make_digits.py's [N, 64] inputs


class HiddenState(nn.Module):
    """A tensor attribute that is neither parameter nor buffer, changed in place through a view:
    no attribute is assigned, yet a replay from a snapshot starts from another value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 4)
        self.seen = torch.zeros(1)

    def forward(self, x):
        view = self.seen.view(-1)
        view.add_(1.0)
        return self.fc(x) / self.seen


save(HiddenState(), "hidden_state.pt")


class InPlaceAfterSigmoid(nn.Module):
    """Changes in place a tensor its backward pass needs: fails in training, not in forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        y = torch.sigmoid(self.fc(x))
        y.mul_(2.0)
        return y


save(InPlaceAfterSigmoid(), "inplace_backward.pt")
