"""veritrain's zoo models mlp and cnn as PyTorch modules, written from docs/training.md.

`veritrain export --safetensors` writes a zoo model's parameters and buffers under these
modules' names, so the trained weights load as they are:

    import json, torch
    from safetensors.torch import load_file          # or any safetensors reader
    from veritrain_zoo import build

    task = json.load(open("task.json"))
    net = build(task["model"]["name"], task["model"]["options"])
    net.load_state_dict(load_file("model.safetensors"))
    net.eval()
    logits = net(inputs)                             # [B, classes]

The reference replay (replay_ref.py) trains with the same modules, which is what keeps their
names and their order of initialisation honest: it must reproduce veritrain's roots bit for
bit. Options missing from `options` take the zoo's defaults (docs/task.md). gpt and conv3d are
not here (the reference does not cover them).
"""
import torch.nn.functional as F
from torch import nn

DEFAULTS = {"mlp": {"input_dim": 32, "hidden": 64, "layers": 2, "classes": 4},
            "cnn": {"width": 16, "blocks": 1, "classes": 10}}


class Mlp(nn.Module):
    def __init__(self, o):
        super().__init__()
        layers, width = [], o["input_dim"]
        for _ in range(o["layers"]):
            layers += [nn.Linear(width, o["hidden"]), nn.ReLU()]
            width = o["hidden"]
        self.body = nn.Sequential(*layers, nn.Linear(width, o["classes"]))

    def forward(self, x):
        return self.body(x.flatten(1))


def conv3x3(cin, cout, stride):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, cout, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv3x3(cout, cout, 1), nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    def __init__(self, o):
        super().__init__()
        w, blocks = o["width"], o["blocks"]
        self.stem, self.stem_bn = conv3x3(3, w, 1), nn.BatchNorm2d(w)
        self.head = nn.Linear(2 * w, o["classes"])  # initialised before the blocks
        stages = [BasicBlock(w, w, 1) for _ in range(blocks)] + [BasicBlock(w, 2 * w, 2)]
        stages += [BasicBlock(2 * w, 2 * w, 1) for _ in range(1, blocks)]
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        return self.head(self.stages(x).mean((2, 3)))


def build(name, options=None):
    """The zoo model `name` ("mlp" or "cnn") with `options` over the defaults."""
    if name not in DEFAULTS:
        raise ValueError("veritrain_zoo covers mlp and cnn, not %r" % name)
    o = dict(DEFAULTS[name], **(options or {}))
    return Mlp(o) if name == "mlp" else ResNet(o)
