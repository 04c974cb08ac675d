"""Exact-mode modules for tests/adversary/irreproducible_test.cpp: torchaudio 0.13's wav2vec 2.0
at a small size (its last feature-extractor GELU receives a transposed gradient, which LibTorch
1.13's oneDNN path read from memory it never wrote until veritrain repaired it), a classifier that
adds memory it never wrote to its output on purpose, and 64 random [1, 800] waveforms with class
targets in 0..9 to train both on. Usage: irreproducible_modules.py OUTDIR SCRIPTS_DIR (scripts/,
for make_digits)."""
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torch.nn as nn
from torchaudio.models.wav2vec2 import wav2vec2_model
from make_digits import safetensors_bytes
out = sys.argv[1]


class Wav2Vec2(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = wav2vec2_model(
            extractor_mode="group_norm", extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2), (16, 2, 2)],
            extractor_conv_bias=False, encoder_embed_dim=32, encoder_projection_dropout=0.1,
            encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=2,
            encoder_num_heads=4, encoder_attention_dropout=0.1, encoder_ff_interm_features=64,
            encoder_ff_interm_dropout=0.0, encoder_dropout=0.1, encoder_layer_norm_first=False,
            encoder_layer_drop=0.0, aux_num_out=10)

    def forward(self, x):  # x [B, 1, 800] waveforms -> [B, 10]
        y, _ = self.m(x.squeeze(1))
        return y.mean(dim=1)


class ReadsUnwrittenMemory(nn.Module):
    """A linear classifier whose output has memory that nothing wrote added to it (bounded, so
    that training stays finite): each process computes other bits."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(800, 10)

    def forward(self, x):
        y = self.fc(x.flatten(1))
        noise = torch.nan_to_num(torch.empty_like(y), 0.0, 0.0, 0.0).clamp(-1e-3, 1e-3)
        return y + noise


torch.manual_seed(0)
torch.jit.script(Wav2Vec2()).save("%s/wav2vec2.pt" % out)
torch.jit.script(ReadsUnwrittenMemory()).save("%s/unwritten.pt" % out)
rng = np.random.default_rng(0)
waves = rng.standard_normal((64, 1, 800)).astype(np.float32)
targets = rng.integers(0, 10, 64).astype(np.int64)
with open("%s/waves.safetensors" % out, "wb") as f:
    f.write(safetensors_bytes({"inputs": ("F32", waves), "targets": ("I64", targets)}))
