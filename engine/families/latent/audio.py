"""wav2vec2-base as SoulX-FlashHead hears audio: every transformer layer's output, one row per video frame.

Our own module (no transformers dependency in the engine) with the parameter names of
facebook/wav2vec2-base-960h's checkpoint, so its files load as they are. The conv encoder's
features are linearly resampled to the video's frame count before the transformer, as the
official pipeline does, and each frame then gets a window of its neighbours' features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import AudioEncoderConfig

SAMPLE_RATE = 16000


def normalize(pcm: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance per clip (wav2vec2's feature extractor, do_normalize=True)."""
    return (pcm - pcm.mean(-1, keepdim=True)) / torch.sqrt(pcm.var(-1, keepdim=True, unbiased=False) + 1e-7)


class ConvLayer(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, group_norm: bool):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, bias=False)
        self.layer_norm = nn.GroupNorm(c_out, c_out) if group_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return F.gelu(self.layer_norm(x) if self.layer_norm is not None else x)


class FeatureEncoder(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        ins = (1, *c.conv_dim[:-1])
        self.conv_layers = nn.ModuleList(ConvLayer(i, o, k, s, n == 0) for n, (i, o, k, s) in
                                         enumerate(zip(ins, c.conv_dim, c.conv_kernel, c.conv_stride)))

    def forward(self, pcm: torch.Tensor) -> torch.Tensor:
        x = pcm[:, None]
        for layer in self.conv_layers:
            x = layer(x)
        return x  # [b, channels, steps]


class FeatureProjection(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.layer_norm = nn.LayerNorm(c.conv_dim[-1], eps=c.layer_norm_eps)
        self.projection = nn.Linear(c.conv_dim[-1], c.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(x))


class WeightNormConv(nn.Module):
    """A grouped conv whose weight is g * v / |v|, the norm taken per kernel tap (dim 2)."""

    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        k, groups, d = c.num_conv_pos_embeddings, c.num_conv_pos_embedding_groups, c.hidden_size
        self.weight_g = nn.Parameter(torch.ones(1, 1, k))
        self.weight_v = nn.Parameter(torch.randn(d, d // groups, k) / (d // groups * k) ** 0.5)
        self.bias = nn.Parameter(torch.zeros(d))
        self.groups, self.padding = groups, k // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.weight_v
        weight = self.weight_g * v / v.norm(dim=(0, 1), keepdim=True)
        return F.conv1d(x, weight, self.bias, padding=self.padding, groups=self.groups)


class PositionalConv(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.conv = WeightNormConv(c)
        self.trim = 1 if c.num_conv_pos_embeddings % 2 == 0 else 0  # an even kernel pads one step too many

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        return F.gelu(y[..., : y.shape[-1] - self.trim]).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        d = c.hidden_size
        self.heads = c.num_attention_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (p(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))


class FeedForward(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.intermediate_dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.output_dense = nn.Linear(c.intermediate_size, c.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class EncoderLayer(nn.Module):
    """Post-norm: attention, norm, feed-forward, norm (wav2vec2-base)."""

    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.attention = Attention(c)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.feed_forward = FeedForward(c)
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class Encoder(nn.Module):
    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.pos_conv_embed = PositionalConv(c)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.layer_norm(x + self.pos_conv_embed(x))
        outputs = []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return outputs


class AudioEncoder(nn.Module):
    """16 kHz speech -> [frames, layers, hidden] features, `frames` rows spread over the clip."""

    def __init__(self, c: AudioEncoderConfig):
        super().__init__()
        self.config = c
        self.feature_extractor = FeatureEncoder(c)
        self.feature_projection = FeatureProjection(c)
        self.encoder = Encoder(c)

    def forward(self, pcm: torch.Tensor, frames: int) -> torch.Tensor:
        """pcm [b, samples] (normalized) -> [b, frames, layers, hidden]."""
        steps = self.feature_extractor(pcm)
        resampled = F.interpolate(steps, size=frames, mode="linear", align_corners=True).transpose(1, 2)
        return torch.stack(self.encoder(self.feature_projection(resampled)), 2)


def frame_windows(features: torch.Tensor, window: int) -> torch.Tensor:
    """[frames, layers, hidden] -> [frames, window, layers, hidden]: each frame with its
    neighbours (window // 2 either side), repeating the first and last frame at the edges."""
    half = window // 2
    frames = features.shape[0]
    index = (torch.arange(frames)[:, None] + torch.arange(-half, half + 1)[None]).clamp(0, frames - 1)
    return features[index.to(features.device)]
