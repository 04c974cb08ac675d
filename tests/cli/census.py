"""The public zoo in portable arithmetic: every architecture of Debian's torchvision 0.14
(classification, segmentation, video), torchaudio 0.13 and torch.nn's layers and losses, each
scripted at a small size (inside a minimal classifier where it is a layer, with its own loss and
`loss: model` where it is a loss) and given to `veritrain-torch task init --determinism portable`.

Usage: census.py OUTDIR VERITRAIN_TORCH [--only NAME,...] [--json]

(torchaudio's DeepSpeech is not in it: Debian's torch cannot script it, hardtanh(x, 0, ...)
passing an int.) A model trains portably when task init accepts it; otherwise it must be refused naming the
operator and the line of the module that runs it. Models listed in REFUSED are expected refused
with that operator (what the portable arithmetic does not have yet); every other model must be
portable, and a refused model must not start to pass unnoticed. Exit 1 on any surprise. Where a
torchvision builder's classifier head would make the file hundreds of MB (vgg, alexnet), the
head is the same layer kinds at a smaller width: the census is about operators, not sizes.
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio.models as tam
import torchvision.models as tvm
import torchvision.models.segmentation as tvs
import torchvision.models.video as tvv

CLASSES = 10


def head_small(m, attr, width):
    """Replaces a Sequential head's Linear layers with narrower ones of the same kinds."""
    old = getattr(m, attr)
    layers, fan_in = [], None
    linears = [l for l in old if isinstance(l, nn.Linear)]
    for l in old:
        if isinstance(l, nn.Linear):
            fan_in = l.in_features if fan_in is None else fan_in
            out = CLASSES if l is linears[-1] else width
            layers.append(nn.Linear(fan_in, out))
            fan_in = out
        else:
            layers.append(l)
    setattr(m, attr, nn.Sequential(*layers))
    return m


class Classify(nn.Module):
    """A layer of torch.nn inside the least classifier around it: features -> layer -> linear."""
    def __init__(self, layer):
        super().__init__()
        self.layer, self.fc = layer, nn.LazyLinear(CLASSES)

    def forward(self, x):
        return self.fc(self.layer(x).flatten(1))


class Encoder(nn.Module):
    """An attention layer over rows [B, T, F]: the last step's features classify."""
    def __init__(self, layer, width):
        super().__init__()
        self.layer, self.fc = layer, nn.Linear(width, CLASSES)

    def forward(self, x):
        return self.fc(self.layer(x)[:, -1])


class Decoder(Encoder):
    def forward(self, x):
        return self.fc(self.layer(x, x)[:, -1])


class Attention(Encoder):
    def forward(self, x):
        return self.fc(self.layer(x, x, x)[0][:, -1])


class RnnT(Encoder):
    """nn.RNN / LSTM / GRU, returning (output, state)."""
    def forward(self, x):
        return self.fc(self.layer(x)[0][:, -1])


def hot(y):
    return F.one_hot(y, 10).float()  # CLASSES: TorchScript reads no global


def sign(y):
    return hot(y) * 2.0 - 1.0


class Lossy(nn.Module):
    """A loss of torch.nn on a small classifier's outputs: forward(x, y) returns the loss; each
    subclass calls its loss as its documentation does."""
    def __init__(self, loss):
        super().__init__()
        self.fc, self.fc2, self.loss = nn.Linear(32, CLASSES), nn.Linear(32, CLASSES), loss

    def forward(self, x, y):
        return self.loss(self.fc(x), hot(y))


class OnClasses(Lossy):
    def forward(self, x, y):
        return self.loss(self.fc(x), y)


class OnLogProbs(Lossy):
    def forward(self, x, y):
        return self.loss(F.log_softmax(self.fc(x), 1), y)


class OnProbabilities(Lossy):
    def forward(self, x, y):
        return self.loss(torch.sigmoid(self.fc(x)), hot(y))


class OnSigns(Lossy):
    def forward(self, x, y):
        return self.loss(self.fc(x), sign(y))


class Distilled(Lossy):
    def forward(self, x, y):
        return self.loss(F.log_softmax(self.fc(x), 1), F.softmax(self.fc2(x), 1).detach())


class WithVariance(Lossy):
    def forward(self, x, y):
        return self.loss(self.fc(x), hot(y), F.softplus(self.fc2(x)) + 0.1)


class Ranked(Lossy):
    def forward(self, x, y):
        return self.loss(self.fc(x)[:, 0], self.fc2(x)[:, 0], sign(y)[:, 0])


class Paired(Lossy):
    def forward(self, x, y):
        return self.loss(self.fc(x), self.fc2(x), sign(y)[:, 0])


class Triplet(Lossy):
    def forward(self, x, y):
        z = self.fc(x)
        return self.loss(z, self.fc2(x), z.flip(0))


LOSSES = [
    ("l1", Lossy, nn.L1Loss), ("smooth_l1", Lossy, lambda: nn.SmoothL1Loss(beta=0.5)),
    ("huber", Lossy, nn.HuberLoss), ("mse", Lossy, nn.MSELoss),
    ("bce", OnProbabilities, nn.BCELoss), ("bce_logits", Lossy, nn.BCEWithLogitsLoss),
    ("kl_div", Distilled, lambda: nn.KLDivLoss(reduction="batchmean")),
    ("nll", OnLogProbs, nn.NLLLoss),
    ("cross_entropy", OnClasses, lambda: nn.CrossEntropyLoss(label_smoothing=0.1)),
    ("multi_margin", OnClasses, nn.MultiMarginLoss), ("soft_margin", OnSigns, nn.SoftMarginLoss),
    ("multilabel_soft_margin", Lossy, nn.MultiLabelSoftMarginLoss),
    ("hinge_embedding", OnSigns, nn.HingeEmbeddingLoss), ("poisson_nll", Lossy, nn.PoissonNLLLoss),
    ("gaussian_nll", WithVariance, nn.GaussianNLLLoss),
    ("margin_ranking", Ranked, lambda: nn.MarginRankingLoss(0.1)),
    ("cosine_embedding", Paired, lambda: nn.CosineEmbeddingLoss(0.1)),
    ("triplet_margin", Triplet, nn.TripletMarginLoss),
]


class Audio(nn.Module):
    """A torchaudio model that returns a tuple: its first tensor, pooled, classifies."""
    def __init__(self, model, width: int, pool_dim: int = 1):
        super().__init__()
        self.model, self.fc, self.pool_dim = model, nn.Linear(width, CLASSES), pool_dim

    def forward(self, x):
        return self.fc(self.model(x)[0].mean(self.pool_dim))


class WithLengths(Audio):
    """conformer's forward(input, lengths) -> (output, lengths): every row at full length."""
    def forward(self, x):
        n = torch.full([x.size(0)], x.size(1), dtype=torch.long)
        return self.fc(self.model(x, n)[0].mean(self.pool_dim))


class Tasnet(nn.Module):
    """conv_tasnet separates sources [B, S, T]: classified from their mean over time."""
    def __init__(self, model):
        super().__init__()
        self.model, self.fc = model, nn.Linear(2, CLASSES)

    def forward(self, x):
        return self.fc(self.model(x).mean(2))


class Wav2Letter(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = tam.Wav2Letter(num_classes=CLASSES, input_type="mfcc", num_features=8)

    def forward(self, x):
        return self.model(x).mean(2)


class Bag(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.bag, self.fc = nn.EmbeddingBag(50, 16, mode=mode), nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.fc(self.bag(x))


class Positions(nn.Module):
    """Token embeddings with padding_idx and cumsum positions (fairseq's make_positions)."""
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(50, 16, padding_idx=0), nn.Embedding(20, 16)
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x):
        mask = x.ne(0).long()
        positions = torch.cumsum(mask, 1) * mask
        return self.fc((self.tok(x) + self.pos(positions)).mean(1))


def img(layer):
    return Classify(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), layer))


def vit():
    return tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                 hidden_dim=32, mlp_dim=64, num_classes=CLASSES)


def swin(v2):
    from torchvision.models import swin_transformer as st
    block = st.SwinTransformerBlockV2 if v2 else st.SwinTransformerBlock
    merge = st.PatchMergingV2 if v2 else st.PatchMerging
    return st.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                              window_size=[4, 4], num_classes=CLASSES, block=block,
                              downsample_layer=merge)


def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=CLASSES)


def resnet_like(**kw):
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [1, 1, 1, 1], num_classes=CLASSES, **kw)


def wav2vec2(hubert):
    return tam.wav2vec2_model(
        extractor_mode="layer_norm" if hubert else "group_norm",
        extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)], extractor_conv_bias=hubert,
        encoder_embed_dim=16, encoder_projection_dropout=0.1, encoder_pos_conv_kernel=4,
        encoder_pos_conv_groups=2, encoder_num_layers=2, encoder_num_heads=2,
        encoder_attention_dropout=0.1, encoder_ff_interm_features=32,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.1, encoder_layer_norm_first=hubert,
        encoder_layer_drop=0.05, aux_num_out=None)


# (family, name, builder, data kind, loss)
MODELS = [
    ("classification", "alexnet", lambda: head_small(tvm.alexnet(num_classes=CLASSES), "classifier", 64), "images64", None),
    ("classification", "vgg11", lambda: head_small(tvm.vgg11(num_classes=CLASSES), "classifier", 64), "images64", None),
    ("classification", "resnet18", lambda: tvm.resnet18(num_classes=CLASSES), "images64", None),
    ("classification", "resnext", lambda: resnet_like(groups=4, width_per_group=8), "images64", None),
    ("classification", "wide_resnet", lambda: resnet_like(width_per_group=128), "images64", None),
    ("classification", "squeezenet1_1", lambda: tvm.squeezenet1_1(num_classes=CLASSES), "images64", None),
    ("classification", "densenet", lambda: tvm.DenseNet(8, (2, 2), 16, num_classes=CLASSES), "images64", None),
    ("classification", "googlenet", lambda: tvm.googlenet(num_classes=CLASSES, aux_logits=True, init_weights=False), "images64", None),
    ("classification", "inception_v3", lambda: tvm.inception_v3(num_classes=CLASSES, aux_logits=True, init_weights=False), "images299", None),
    ("classification", "shufflenet_v2", lambda: tvm.shufflenet_v2_x0_5(num_classes=CLASSES), "images64", None),
    ("classification", "mobilenet_v2", lambda: tvm.mobilenet_v2(num_classes=CLASSES), "images64", None),
    ("classification", "mobilenet_v3", lambda: tvm.mobilenet_v3_small(num_classes=CLASSES), "images64", None),
    ("classification", "mnasnet", lambda: tvm.mnasnet0_5(num_classes=CLASSES), "images64", None),
    ("classification", "efficientnet", lambda: tvm.efficientnet_b0(num_classes=CLASSES), "images64", None),
    ("classification", "efficientnet_v2", lambda: tvm.efficientnet_v2_s(num_classes=CLASSES), "images64", None),
    ("classification", "regnet", lambda: tvm.regnet_y_400mf(num_classes=CLASSES), "images64", None),
    ("classification", "vit", vit, "images32", None),
    ("classification", "convnext", convnext, "images32", None),
    ("classification", "swin", lambda: swin(False), "images32", None),
    ("classification", "swin_v2", lambda: swin(True), "images32", None),
    ("classification", "maxvit", lambda: tvm.MaxVit(input_size=(64, 64), stem_channels=8, partition_size=2, block_channels=[8, 16], block_layers=[1, 1], head_dim=4, stochastic_depth_prob=0.1, num_classes=CLASSES), "images64", None),
    ("segmentation", "fcn", lambda: tvs.fcn_resnet50(num_classes=4, weights_backbone=None, aux_loss=True), "segments", None),
    ("segmentation", "deeplabv3", lambda: tvs.deeplabv3_mobilenet_v3_large(num_classes=4, weights_backbone=None, aux_loss=True), "segments", None),
    ("segmentation", "lraspp", lambda: tvs.lraspp_mobilenet_v3_large(num_classes=4, weights_backbone=None), "segments", None),
    ("video", "r3d_18", lambda: tvv.r3d_18(num_classes=CLASSES), "clips", None),
    ("video", "mc3_18", lambda: tvv.mc3_18(num_classes=CLASSES), "clips", None),
    ("video", "r2plus1d_18", lambda: tvv.r2plus1d_18(num_classes=CLASSES), "clips", None),
    ("video", "s3d", lambda: tvv.s3d(num_classes=CLASSES), "clips224", None),
    ("audio", "wav2letter", Wav2Letter, "rows", None),
    ("audio", "conformer", lambda: WithLengths(tam.Conformer(input_dim=32, num_heads=2, ffn_dim=32, num_layers=2, depthwise_conv_kernel_size=3, dropout=0.1), 32), "rows", None),
    ("audio", "conv_tasnet", lambda: Tasnet(tam.ConvTasNet(num_sources=2, enc_kernel_size=4, enc_num_feats=16, msk_kernel_size=3, msk_num_feats=8, msk_num_hidden_feats=16, msk_num_layers=2, msk_num_stacks=1)), "waves1", None),
    ("audio", "wav2vec2", lambda: Audio(wav2vec2(False), 16), "waves", None),
    ("audio", "hubert", lambda: Audio(wav2vec2(True), 16), "waves", None),
    ("sequence", "rnn_tanh", lambda: RnnT(nn.RNN(32, 16, batch_first=True), 16), "rows", None),
    ("sequence", "rnn_relu", lambda: RnnT(nn.RNN(32, 16, nonlinearity="relu", batch_first=True), 16), "rows", None),
    ("sequence", "lstm", lambda: RnnT(nn.LSTM(32, 16, num_layers=2, batch_first=True), 16), "rows", None),
    ("sequence", "lstm_dropout", lambda: RnnT(nn.LSTM(32, 16, num_layers=2, dropout=0.2, batch_first=True), 16), "rows", None),
    ("sequence", "lstm_proj", lambda: RnnT(nn.LSTM(32, 16, proj_size=8, batch_first=True), 8), "rows", None),
    ("sequence", "gru", lambda: RnnT(nn.GRU(32, 16, bidirectional=True, batch_first=True), 32), "rows", None),
    ("sequence", "transformer_encoder", lambda: Encoder(nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 2, 64, batch_first=True), 2), 32), "rows", None),
    ("sequence", "transformer_decoder", lambda: Decoder(nn.TransformerDecoderLayer(32, 2, 64, batch_first=True), 32), "rows", None),
    ("sequence", "multihead_attention", lambda: Attention(nn.MultiheadAttention(32, 2, batch_first=True), 32), "rows", None),
    ("image layer", "instance_norm", lambda: img(nn.InstanceNorm2d(8, affine=True)), "images32", None),
    ("image layer", "local_response_norm", lambda: img(nn.LocalResponseNorm(2)), "images32", None),
    ("image layer", "upsample_nearest", lambda: img(nn.Upsample(scale_factor=2)), "images32", None),
    ("image layer", "upsample_bilinear", lambda: img(nn.Upsample(scale_factor=2, mode="bilinear")), "images32", None),
    ("image layer", "pixel_shuffle", lambda: img(nn.PixelShuffle(2)), "images32", None),
    ("image layer", "channel_shuffle", lambda: img(nn.ChannelShuffle(2)), "images32", None),
    ("image layer", "prelu", lambda: img(nn.PReLU(8)), "images32", None),
    ("image layer", "glu", lambda: img(nn.GLU(1)), "images32", None),
    ("image layer", "lp_pool", lambda: img(nn.LPPool2d(2, 2)), "images32", None),
    ("image layer", "zero_pad", lambda: img(nn.ZeroPad2d(1)), "images32", None),
    ("image layer", "reflection_pad", lambda: img(nn.ReflectionPad2d(1)), "images32", None),
    ("image layer", "replication_pad", lambda: img(nn.ReplicationPad2d(1)), "images32", None),
    ("image layer", "conv_transpose", lambda: img(nn.ConvTranspose2d(8, 4, 3, stride=2)), "images32", None),
    ("image layer", "group_norm", lambda: img(nn.GroupNorm(2, 8)), "images32", None),
    ("image layer", "max_pool1d", lambda: Classify(nn.Sequential(nn.Conv1d(8, 8, 3), nn.MaxPool1d(2))), "rows", None),
    ("image layer", "avg_pool1d", lambda: Classify(nn.Sequential(nn.Conv1d(8, 8, 3), nn.AvgPool1d(2))), "rows", None),
    ("image layer", "adaptive_avg_pool1d", lambda: Classify(nn.Sequential(nn.Conv1d(8, 8, 3), nn.AdaptiveAvgPool1d(4))), "rows", None),
    ("image layer", "max_pool3d", lambda: Classify(nn.Sequential(nn.Conv3d(3, 4, 3, padding=1), nn.MaxPool3d(2))), "clips", None),
    ("image layer", "avg_pool3d", lambda: Classify(nn.Sequential(nn.Conv3d(3, 4, 3, padding=1), nn.AvgPool3d(2))), "clips", None),
    ("image layer", "dropout2d", lambda: img(nn.Dropout2d(0.2)), "images32", None),
    ("element-wise", "selu", lambda: img(nn.SELU()), "images32", None),
    ("element-wise", "celu", lambda: img(nn.CELU(0.5)), "images32", None),
    ("element-wise", "mish", lambda: img(nn.Mish()), "images32", None),
    ("element-wise", "log_sigmoid", lambda: img(nn.LogSigmoid()), "images32", None),
    ("element-wise", "hardshrink", lambda: img(nn.Hardshrink()), "images32", None),
    ("element-wise", "softshrink", lambda: img(nn.Softshrink()), "images32", None),
    ("element-wise", "threshold", lambda: img(nn.Threshold(0.1, 0.0)), "images32", None),
    ("element-wise", "rrelu", lambda: img(nn.RReLU()), "images32", None),
    ("element-wise", "alpha_dropout", lambda: img(nn.AlphaDropout(0.2)), "images32", None),
    ("element-wise", "softsign", lambda: img(nn.Softsign()), "images32", None),
    ("element-wise", "tanhshrink", lambda: img(nn.Tanhshrink()), "images32", None),
    ("element-wise", "softmin", lambda: img(nn.Softmin(1)), "images32", None),
    ("element-wise", "elu", lambda: img(nn.ELU()), "images32", None),
    ("tokens", "embedding_bag", lambda: Bag("mean"), "tokens", None),
    ("tokens", "positions", Positions, "tokens", None),
] + [("loss", name, (lambda wrap=wrap, loss=loss: wrap(loss())), "rows32", "model")
     for name, wrap, loss in LOSSES]

# What still keeps a model out: the operator task init names for it (statically, with the line
# of the module), or the portable operator's own refusal when the step runs.
REFUSED = {
}

DATA = {
    "images32": ((3, 32, 32), "class"), "images64": ((3, 64, 64), "class"),
    "images299": ((3, 299, 299), "class"), "segments": ((3, 64, 64), "segments"),
    "clips": ((3, 4, 32, 32), "class"), "clips224": ((3, 16, 224, 224), "class"),
    "rows": ((8, 32), "class"), "rows4": ((4, 32), "class"), "rows32": ((32,), "class"),
    "waves": ((400,), "class"), "waves1": ((1, 400), "class"), "tokens": ((8,), "tokens"),
}


def write_data(out, kind):
    from make_digits import safetensors_bytes
    shape, targets = DATA[kind]
    rng = np.random.RandomState(5)
    n = 4 if kind == "clips224" else 8  # s3d's head pools 7 × 7 of 224 × 224: 38 MB of clips
    if targets == "tokens":
        inputs = ("I64", rng.randint(0, 50, (n,) + shape).astype(np.int64))
    else:
        inputs = ("F32", rng.uniform(-1, 1, (n,) + shape).astype(np.float32))
    labels = rng.randint(0, 4 if targets == "segments" else CLASSES, (n,) + ((64, 64) if targets == "segments" else ()))
    path = os.path.join(out, kind + ".safetensors")
    with open(path, "wb") as f:
        f.write(safetensors_bytes({"inputs": inputs, "targets": ("I64", labels.astype(np.int64))}))
    return path


def numpy_weights(m, rng):
    with torch.no_grad():
        for _, p in sorted(m.named_parameters()):
            if p.dim() == 1 and p.numel() > 0 and bool((p == p.flatten()[0]).all()):
                continue
            fan_in = p[0].numel() if p.dim() >= 2 else max(p.numel(), 1)
            bound = 1.0 / np.sqrt(fan_in)
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, p.shape).astype(np.float32)))
    return m


def census(out, binary, only):
    rows, surprises = [], []
    made = {}
    for family, name, build, kind, loss in MODELS:
        if only and name not in only:
            continue
        if kind not in made:
            made[kind] = write_data(out, kind)
        torch.manual_seed(0)
        m = build()
        shape, _ = DATA[kind]
        if any(isinstance(p, nn.parameter.UninitializedParameter) for p in m.parameters()):
            with torch.no_grad():  # a lazy layer's size from one call
                m.eval()
                m(torch.zeros((2,) + shape))
        m.train()
        numpy_weights(m, np.random.RandomState(7))
        path = os.path.join(out, name + ".pt")
        try:
            torch.jit.script(m).save(path)
        except Exception as e:  # a module TorchScript cannot compile is not in the census
            rows.append((family, name, "unscriptable", str(e).splitlines()[0][:100]))
            surprises.append("%s: torch.jit.script failed: %s" % (name, str(e).splitlines()[0]))
            continue
        cmd = [binary, "task", "init", "--determinism", "portable", "--model", "torchscript",
               "--model-file", path, "--dataset", "tensors", "--data-file", made[kind],
               "--eval-fraction", "0.25", "--epochs", "1", "--steps-per-epoch", "1",
               "--batch-size", "2", "--out", os.path.join(out, name + ".json")]
        if loss:
            cmd += ["--loss", loss]
        began = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.time() - began
        os.remove(path)  # some are a hundred MB
        first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
        if r.returncode == 0:
            rows.append((family, name, "portable", "%.1f s" % seconds))
            if name in REFUSED:
                surprises.append("%s: portable now; take it out of REFUSED" % name)
            continue
        rows.append((family, name, "refused", first))
        want = REFUSED.get(name)
        if want is None:
            surprises.append("%s: refused: %s" % (name, r.stderr.strip()))
        elif want not in first:
            surprises.append("%s: refused for another reason than %s: %s" % (name, want, first))
        elif "no portable kernel for" in first and not re.search(r"\(\S+:\d+: `", first):
            surprises.append("%s: the refusal names no line of the module: %s" % (name, first))
    return rows, surprises


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    out, binary = args[0], args[1]
    os.makedirs(out, exist_ok=True)
    only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else set()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    rows, surprises = census(out, binary, only)
    portable = sum(1 for r in rows if r[2] == "portable")
    if "--json" in args:
        print(json.dumps([dict(zip(("family", "model", "result", "detail"), r)) for r in rows], indent=1))
    else:
        for family in dict.fromkeys(r[0] for r in rows):
            mine = [r for r in rows if r[0] == family]
            print("%-15s %d of %d portable" % (family, sum(1 for r in mine if r[2] == "portable"), len(mine)))
            for r in mine:
                print("  %-24s %-9s %s" % (r[1], r[2], r[3][:150]))
    print("census: %d of %d portable (%.0f %%)" % (portable, len(rows), 100.0 * portable / max(len(rows), 1)))
    for s in surprises:
        print("SURPRISE " + s)
    sys.exit(1 if surprises else 0)


if __name__ == "__main__":
    main()
