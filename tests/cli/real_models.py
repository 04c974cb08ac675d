"""Real models for tests/cli/real_models_test.cpp: torchvision's resnet18 and mobilenet_v2, a
TransformerEncoder and an LSTM classifier from torch.nn and a module with an operator that has no
portable kernel, each scripted by Debian's torch with weights from numpy, and sklearn's digits as
images and as rows. Usage: real_models.py OUTDIR SCRIPTS_DIR (scripts/, for make_digits
and requestor_nets)."""
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
import torchvision.models as tvm
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
from requestor_nets import Encoder, Lstm
out = sys.argv[1]

class Pooled(nn.Module):
    """Operators without a portable kernel: refused by name."""
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(torch.lgamma(x))

class Powed(nn.Module):
    """pow with a tensor exponent, which LibTorch leaves to the CPU's own pow: refused, saying
    which it allows."""
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(torch.pow(x.abs(), x).mean(1))

# Weights from numpy: the same on every CPU (torch's own random fill differs with the vector
# width). Constant tensors (batch norm's ones and zeros) stay as built.
rng = np.random.RandomState(7)
def numpy_weights(m):
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            fan_in = p[0].numel() if p.dim() >= 2 else p.numel()
            if p.dim() == 1 and bool((p == p.flatten()[0]).all()):
                continue
            bound = 1.0 / np.sqrt(fan_in)
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, p.shape).astype(np.float32)))
    return m

for name, m in [("resnet18", tvm.resnet18(num_classes=10)),
                ("mobilenet_v2", tvm.mobilenet_v2(num_classes=10)),
                ("encoder", Encoder(32)), ("lstm", Lstm(32, 32, layers=2, bidirectional=True)),
                ("pooled", Pooled()), ("powed", Powed())]:
    torch.jit.script(numpy_weights(m)).save("%s/%s.pt" % (out, name))

d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:64]
targets = d.target.astype(np.int64)[:64]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
rows = np.tile(pixels, (1, 1, 4))  # [64, 8, 32]: 8 steps of 32 features
for name, inputs in [("images", images), ("rows", rows)]:
    with open("%s/%s.safetensors" % (out, name), "wb") as f:
        f.write(safetensors_bytes({"inputs": ("F32", inputs), "targets": ("I64", targets)}))

# What forward returns (docs/models.md): torchvision's googlenet in training mode returns its
# GoogLeNetOutputs named tuple (main logits first, then the two auxiliary heads); a module that
# returns a dict gives its "out".
class DictOut(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(32, 10); self.aux = nn.Linear(32, 10)
    def forward(self, x):
        h = x.mean(1)
        return {"out": self.fc(h), "aux": self.aux(h)}

for name, m in [("googlenet", tvm.googlenet(num_classes=10, aux_logits=True, init_weights=False)),
                ("dict_out", DictOut())]:
    torch.jit.script(numpy_weights(m)).save("%s/%s.pt" % (out, name))

# Per-position targets (docs/models.md): a small fully convolutional net returning torchvision
# segmentation's {"out": [B, C, H, W]}, on the digits' pixels as 4 intensity classes [B, H, W],
# with a U-Net's way back up: a pooled branch upsampled by nearest neighbours (nn.Upsample).
class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1); self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 4, 1)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
    def forward(self, x):
        h = torch.relu(self.bn(self.c1(x)))
        return {"out": self.c2(h + self.up(nn.functional.max_pool2d(h, 2)))}

torch.jit.script(numpy_weights(Segmenter())).save("%s/segmenter.pt" % out)
classes = np.minimum((images[:, 0] * 4).astype(np.int64), 3)  # [64, 32, 32]
with open("%s/segments.safetensors" % out, "wb") as f:
    f.write(safetensors_bytes({"inputs": ("F32", images), "targets": ("I64", classes)}))

# torchvision's segmentation: LR-ASPP on MobileNetV3 returns {"out": [B, C, H, W]} (built in a
# dict item by item), upsampled bilinearly to the input's size: it trains portably.
import torchvision.models.segmentation as tvs
torch.jit.script(numpy_weights(tvs.lraspp_mobilenet_v3_large(
    num_classes=4, weights=None, weights_backbone=None))).save("%s/lraspp.pt" % out)

# Activations of torch.nn (docs/portable.md, "More functions"): SELU, CELU, Mish, LogSigmoid,
# Hardshrink, Softshrink, Threshold (in place), GLU and PReLU (per channel and shared); sqrt,
# rsqrt, reciprocal, square and pow at 2, 3, 0.5 and -1 (docs/portable.md, "TorchScript modules").
class SeluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 10)
        self.selu, self.celu, self.mish = nn.SELU(), nn.CELU(0.5), nn.Mish()
        self.hard, self.soft = nn.Hardshrink(0.1), nn.Softshrink(0.05)
        self.threshold = nn.Threshold(-0.2, -0.5, inplace=True)
        self.glu, self.d = nn.GLU(), nn.Linear(32, 64)
        self.prelu, self.prelu1 = nn.PReLU(32, init=0.3), nn.PReLU()
    def forward(self, x):
        h = self.celu(self.b(self.selu(self.a(x.mean(1)))))
        g = self.hard(h) + self.soft(self.threshold(h * 2.0)) + self.glu(self.d(h))
        g = self.prelu(g) + self.prelu1(h)
        s = h * h + 1.0
        g = g + torch.sqrt(s) + torch.rsqrt(s) + torch.reciprocal(s) + torch.square(h)
        g = g + h.pow(2) + h.pow(3) + s.pow(0.5) + s.pow(-1) + torch.log(s) + torch.exp(-s)
        g = g + torch.cumsum(h, 1) * 0.125
        return self.c(self.mish(h) + torch.nn.functional.logsigmoid(h) + g)

torch.jit.script(numpy_weights(SeluNet())).save("%s/selu_net.pt" % out)

# Decompositions (docs/portable.md, "Decompositions") and indexing, in a module that computes its
# own loss (`loss: model`): reflected and replicated padding, instance norm, a channel shuffle, a
# 1-d max pool, RReLU and AlphaDropout (the dropout stream's uniforms and masks), an LSTM with
# dropout between its layers, a table indexed by the targets (floor division included), a masked
# assignment, and a loss of decomposed losses, a norm's std and a power.
class Decomposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, stride=2)
        self.norm, self.shuffle = nn.InstanceNorm2d(8, affine=True), nn.ChannelShuffle(2)
        self.pool, self.rrelu, self.alpha = nn.MaxPool1d(4), nn.RReLU(), nn.AlphaDropout(0.2)
        self.rnn = nn.LSTM(8, 8, num_layers=2, dropout=0.25, batch_first=True)
        self.fc, self.table = nn.Linear(8, 10), nn.Parameter(torch.zeros(5, 10))
    def forward(self, x, y):
        h = self.norm(self.c(F.pad(x, [1, 1, 1, 1], mode="reflect")))
        h = self.shuffle(F.pad(self.rrelu(h), [1, 0, 0, 1], mode="replicate"))
        seq, _ = self.rnn(self.pool(h.flatten(2)).transpose(1, 2))
        z = self.fc(self.alpha(seq[:, -1]))
        hot = F.one_hot(y, 10).float()
        row = self.table[torch.div(y, 2, rounding_mode="floor")]
        masked = z.clone()
        masked[hot > 0] = 0.0
        return (F.binary_cross_entropy(torch.sigmoid(z), hot) + F.smooth_l1_loss(z, hot)
                + F.kl_div(F.log_softmax(z, 1), F.softmax(row, 1), reduction="batchmean")
                + F.cosine_embedding_loss(z, row, torch.ones(z.size(0)), 0.1)
                + 0.01 * F.l1_loss(masked, torch.zeros_like(masked))
                + 0.1 * F.normalize(z, dim=1).std()
                + 0.05 * torch.pow(torch.sigmoid(z), 0.75).mean())

torch.jit.script(numpy_weights(Decomposed())).save("%s/decomposed.pt" % out)

# Moves that round nothing (docs/portable.md, "TorchScript modules"): constant padding, flip,
# roll, a pixel shuffle, triu, max and min along a dimension and of two tensors, sign, one_hot;
# LibTorch runs them, and their gradients, alike anywhere. (Debian's
# torch 1.13 has no derivative for channel_shuffle: nn.ChannelShuffle trains in no arithmetic.)
class Shuffler(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(2, 10)
    def forward(self, x):
        y = torch.roll(torch.flip(torch.nn.functional.pad(self.c(x), (1, 1, 1, 1)), [3]), 2, 2)
        y = torch.nn.functional.pixel_shuffle(y, 2).triu()
        y = y + y.max(3, keepdim=True)[0] - torch.sign(y) * y.min(2, keepdim=True)[0]
        y = torch.max(y, y.mean(1, keepdim=True)) + torch.min(y, y * 0.5)
        z = self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))
        return z + torch.nn.functional.one_hot(z.argmax(1), 10).float()

torch.jit.script(numpy_weights(Shuffler())).save("%s/shuffler.pt" % out)

# Video (torchvision's r3d/mc3/r2plus1d shape): 3-d convolutions, BatchNorm3d and the global
# AdaptiveAvgPool3d((1, 1, 1)), on clips of 4 frames: each digit drifting right a pixel a frame.
class ClipNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(3, 8, (3, 3, 3), stride=(1, 2, 2), padding=1)
        self.bn, self.pool = nn.BatchNorm3d(8), nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(8, 10)
    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.bn(self.c(x)))).flatten(1))

torch.jit.script(numpy_weights(ClipNet())).save("%s/clip_net.pt" % out)
clips = np.stack([np.roll(images, t, axis=3) for t in range(4)], axis=2)  # [64, 3, 4, 32, 32]
with open("%s/clips.safetensors" % out, "wb") as f:
    f.write(safetensors_bytes({"inputs": ("F32", clips), "targets": ("I64", targets)}))

# A VAE (docs/portable.md, "Random operators") that computes its own loss: the reparameterised
# z = mu + randn_like(std) ⊗ std, input noise from normal_ on a fresh tensor, a multiplicative
# jitter from uniform_, a randn of a size, pixels picked by randint, and binary cross-entropy of
# the reconstruction plus
# the KL term, against the pixels binarized by torch.bernoulli. On the digits' rows, flattened:
# pixels in [0, 1].
class Vae(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.mu, self.logvar = nn.Linear(256, 64), nn.Linear(64, 16), nn.Linear(64, 16)
        self.dec1, self.dec2 = nn.Linear(16, 64), nn.Linear(64, 256)
    def forward(self, x, y):
        x = x.flatten(1)
        h = torch.relu(self.enc(x + torch.empty_like(x).normal_(0.0, 0.05)))
        mu, logvar = self.mu(h), self.logvar(h)
        mu = mu + 0.01 * x[:, torch.randint(0, 256, [32])].mean(1, keepdim=True)  # 32 pixels
        std = torch.exp(0.5 * logvar)
        z = mu + torch.randn_like(std) * std + 0.01 * torch.randn(mu.size())
        g = torch.relu(self.dec1(z)) * torch.empty_like(h).uniform_(0.9, 1.1)
        recon = torch.sigmoid(self.dec2(g))
        kl = -0.5 * torch.mean(1.0 + logvar - mu.pow(2) - logvar.exp())
        # The pixels binarized afresh each step (a stochastically binarized MNIST's way).
        return F.binary_cross_entropy(recon, torch.bernoulli(x)) + kl

torch.jit.script(numpy_weights(Vae())).save("%s/vae.pt" % out)

# nn.RNN's Elman cells (docs/portable.md, "Recurrent layers"): tanh over two bidirectional
# layers with dropout between them, and ReLU; and an LSTM with projections (proj_size).
class Elman(nn.Module):
    def __init__(self):
        super().__init__()
        self.tanh = nn.RNN(32, 16, num_layers=2, bidirectional=True, batch_first=True, dropout=0.1)
        self.relu = nn.RNN(32, 16, nonlinearity="relu", batch_first=True)
        self.projected = nn.LSTM(32, 16, num_layers=2, proj_size=8, bidirectional=True,
                                 batch_first=True)
        self.fc = nn.Linear(64, 10)
    def forward(self, x):
        a, _ = self.tanh(x)
        b, _ = self.relu(x)
        c, _ = self.projected(x)
        return self.fc(torch.cat([a[:, -1], b[:, -1], c[:, -1]], 1))

torch.jit.script(numpy_weights(Elman())).save("%s/elman.pt" % out)

# An LSTM language model (embedding, two layers with dropout between them, a head per position)
# on the bytes of Debian's fortunes as a u16 `tokens` file: the next byte at every position.
class LstmLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(256, 32)
        self.rnn = nn.LSTM(32, 64, num_layers=2, dropout=0.2, batch_first=True)
        self.head = nn.Linear(64, 256)
    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.head(h)

torch.jit.script(numpy_weights(LstmLm())).save("%s/lstm_lm.pt" % out)
text = open("/usr/share/games/fortunes/fortunes", "rb").read()[:20000]
np.frombuffer(text, np.uint8).astype("<u2").tofile("%s/fortunes.bin" % out)

# Attention written with torch.einsum, as torchvision's MaxViT writes it (spaces, five
# subscripts), a one-operand transpose and a sum over a subscript only one operand names.
class Einsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.fc = nn.Linear(32, 96), nn.Linear(32, 10)
    def forward(self, x):
        q, k, v = self.qkv(x).reshape(x.size(0), 1, 8, 2, 48).chunk(3, -1)
        scores = torch.einsum("B G H I D, B G H J D -> B G H I J", q, k) * 0.25
        mixed = torch.einsum("B G H I J, B G H J D -> B G H I D", scores.softmax(-1), v)
        rows = torch.einsum("bghid->bgihd", mixed).reshape(x.size(0), 8, 32)
        return self.fc(torch.einsum("bij,bij->bj", rows, rows) + torch.einsum("bij->bj", rows))

torch.jit.script(numpy_weights(Einsum())).save("%s/einsum.pt" % out)

# torchaudio's conformer (on the rows as 8 frames of 32 features, every row at full length) and
# wav2vec 2.0 (layer drop's rand, dropout, group norm, the positional convolution's GELU) on
# waveforms made of the digits' pixels, each classified from its output's mean over time.
import torchaudio.models as tam

class Audio(nn.Module):
    def __init__(self, model, width: int):
        super().__init__()
        self.model, self.fc = model, nn.Linear(width, 10)
    def forward(self, x):
        return self.fc(self.model(x)[0].mean(1))

class WithLengths(Audio):
    def forward(self, x):
        n = torch.full([x.size(0)], x.size(1), dtype=torch.long)
        return self.fc(self.model(x, n)[0].mean(1))

conformer = tam.Conformer(input_dim=32, num_heads=2, ffn_dim=32, num_layers=2,
                          depthwise_conv_kernel_size=3, dropout=0.1)
wav2vec2 = tam.wav2vec2_model(
    extractor_mode="group_norm", extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)],
    extractor_conv_bias=False, encoder_embed_dim=16, encoder_projection_dropout=0.1,
    encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=2,
    encoder_num_heads=2, encoder_attention_dropout=0.1, encoder_ff_interm_features=32,
    encoder_ff_interm_dropout=0.0, encoder_dropout=0.1, encoder_layer_norm_first=False,
    encoder_layer_drop=0.05, aux_num_out=None)
for name, m in [("conformer", WithLengths(conformer, 32)), ("wav2vec2", Audio(wav2vec2, 16))]:
    torch.jit.script(numpy_weights(m)).save("%s/%s.pt" % (out, name))
waves = np.repeat(pixels.reshape(64, 64), 7, axis=1)[:, :400] - np.float32(0.5)
with open("%s/waves.safetensors" % out, "wb") as f:
    f.write(safetensors_bytes({"inputs": ("F32", waves.astype(np.float32)), "targets": ("I64", targets)}))
