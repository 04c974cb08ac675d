"""veritrain's zoo models (mlp, cnn, conv3d, gpt) as PyTorch modules, from docs/training.md.

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

The reference replay (replay_ref.py) trains mlp and cnn with the same modules, which is what
keeps their names and their order of initialisation honest: it must reproduce veritrain's roots
bit for bit. conv3d and gpt are here for loading trained weights (tests/cli/export_test.cpp
checks that their held-out loss is the committed one); the reference does not train them, so
their initialisation order is not claimed. Options missing from `options` take the zoo's
defaults (docs/task.md). A gpt takes token ids [B, L] and returns logits [B, L, vocab].
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

DEFAULTS = {"mlp": {"input_dim": 32, "hidden": 64, "layers": 2, "classes": 4},
            "cnn": {"width": 16, "blocks": 1, "classes": 10},
            "conv3d": {"size": 16},
            "gpt": {"vocab": 64, "d_model": 64, "layers": 2, "heads": 4, "seq_len": 32,
                    "mlp_ratio": 4, "dropout_permille": 0}}


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
        head = nn.Linear(2 * w, o["classes"])  # initialised before the blocks
        stages = [BasicBlock(w, w, 1) for _ in range(blocks)] + [BasicBlock(w, 2 * w, 2)]
        stages += [BasicBlock(2 * w, 2 * w, 1) for _ in range(1, blocks)]
        # Registered after the blocks: the model's parameter order, which clipping's l2 norm
        # stacks the per-tensor norms in (docs/training.md, "Recipes").
        self.stages = nn.Sequential(*stages)
        self.head = head

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        return self.head(self.stages(x).mean((2, 3)))


class Conv3dNet(nn.Module):
    def __init__(self, o):
        super().__init__()
        layers = []
        for cin, cout in ((1, 4), (4, 8), (8, 1)):
            layers += [nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU()]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class GptBlock(nn.Module):
    def __init__(self, d, heads, ratio, dropout):
        super().__init__()
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, ratio * d), nn.Linear(ratio * d, d)
        self.drop, self.heads = nn.Dropout(dropout), heads

    def attention(self, qkv):
        b, t, d = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        q, k, v = qkv.view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=qkv.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        return (self.drop(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, t, d)

    def forward(self, x):
        x = x + self.drop(self.proj(self.attention(self.qkv(self.ln1(x)))))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class Gpt(nn.Module):
    def __init__(self, o):
        super().__init__()
        d = o["d_model"]
        self.tok, self.pos = nn.Embedding(o["vocab"], d), nn.Embedding(o["seq_len"], d)
        self.layers = o["layers"]
        for i in range(self.layers):
            setattr(self, "block%d" % i,
                    GptBlock(d, o["heads"], o["mlp_ratio"], o["dropout_permille"] / 1000.0))
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, o["vocab"])

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for i in range(self.layers):
            x = getattr(self, "block%d" % i)(x)
        return self.lm_head(self.ln_f(x))


MODELS = {"mlp": Mlp, "cnn": ResNet, "conv3d": Conv3dNet, "gpt": Gpt}


def build(name, options=None):
    """The zoo model `name` (mlp, cnn, conv3d or gpt) with `options` over the defaults."""
    if name not in MODELS:
        raise ValueError("veritrain_zoo covers %s, not %r" % (", ".join(MODELS), name))
    return MODELS[name](dict(DEFAULTS[name], **(options or {})))
