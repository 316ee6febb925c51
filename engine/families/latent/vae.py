"""Wan2.1's causal video VAE (SoulX-FlashHead's Pro path): 8x spatial and 4x temporal compression.

Every 3-D convolution is causal in time: it sees the current frames and the last two frames
before them, which a `TimeCache` carries from one call to the next. Encoding takes the first
frame alone and then four frames at a time; decoding takes one latent at a time, and
`decode_stream` hands out each latent's frames (1 for the first latent, 4 for each later one)
as soon as they exist. The cache holds at most two frames per convolution, whatever the
length. Parameter names follow the official `Wan2.1_VAE.pth`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .config import VaeConfig

CACHE_FRAMES = 2

class TimeCache:
    """The last frames each causal convolution saw, one slot per convolution in call order."""

    FIRST = torch.empty(0)
    """An upsampler's slot after the first latent, which stands for one frame and is not doubled."""

    def __init__(self) -> None:
        self.slots: list[torch.Tensor | None] = []
        self.cursor = 0

    def rewind(self) -> None:
        """Before each chunk of frames: the convolutions are visited in the same order every time."""
        self.cursor = 0

    def get(self) -> torch.Tensor | None:
        if self.cursor == len(self.slots):
            self.slots.append(None)
        return self.slots[self.cursor]

    def put(self, value: torch.Tensor) -> None:
        self.slots[self.cursor] = value
        self.cursor += 1


class CausalConv3d(nn.Conv3d):
    """Zero-padded in front in time (or preceded by the cached frames), symmetric in space."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pt, ph, pw = cast(tuple[int, int, int], self.padding)
        self.pad = (pw, pw, ph, ph, 2 * pt, 0)
        self.padding = (0, 0, 0)

    def forward(self, x: torch.Tensor, before: torch.Tensor | None = None) -> torch.Tensor:
        pad = list(self.pad)
        if before is not None and pad[4] > 0:
            x = torch.cat([before.to(x.device), x], 2)
            pad[4] -= before.shape[2]
        return super().forward(F.pad(x, pad))


def cached(conv: CausalConv3d, x: torch.Tensor, cache: TimeCache | None) -> torch.Tensor:
    """conv(x) continuing the frames cached for it; the cache then keeps x's last two frames."""
    if cache is None:
        return conv(x)
    before = cache.get()
    kept = x[:, :, -CACHE_FRAMES:].clone()
    if kept.shape[2] < CACHE_FRAMES and before is not None:
        kept = torch.cat([before[:, :, -1:].to(kept.device), kept], 2)
    out = conv(x, before)
    cache.put(kept)
    return out


class RmsNorm(nn.Module):
    """Unit RMS over channels (dim 1), then a per-channel gain."""

    def __init__(self, dim: int, images: bool = True):
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(dim, *((1, 1) if images else (1, 1, 1))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=1) * self.scale * self.gamma


class ResidualBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        # indices as in the checkpoint (the official block has a dropout at 5)
        self.residual = nn.Sequential(
            RmsNorm(in_dim, images=False), nn.SiLU(), CausalConv3d(in_dim, out_dim, 3, padding=1),
            RmsNorm(out_dim, images=False), nn.SiLU(), nn.Identity(), CausalConv3d(out_dim, out_dim, 3, padding=1))
        self.shortcut = CausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(self, x: torch.Tensor, cache: TimeCache | None = None) -> torch.Tensor:
        h = self.shortcut(x)
        for layer in self.residual:
            x = cached(layer, x, cache) if isinstance(layer, CausalConv3d) else layer(x)
        return x + h


class AttentionBlock(nn.Module):
    """Single-head self-attention within each frame."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = RmsNorm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x: torch.Tensor, cache: TimeCache | None = None) -> torch.Tensor:
        b, c, t, h, w = x.shape
        y = self.to_qkv(self.norm(rearrange(x, "b c t h w -> (b t) c h w")))
        q, k, v = rearrange(y, "bt c h w -> bt 1 (h w) c").chunk(3, dim=-1)
        y = rearrange(F.scaled_dot_product_attention(q, k, v), "bt 1 (h w) c -> bt c h w", h=h)
        return x + rearrange(self.proj(y), "(b t) c h w -> b c t h w", t=t)


class Resample(nn.Module):
    """2x in space (each frame), and for the 3-D modes 2x in time through a causal conv."""

    def __init__(self, dim: int, mode: str):
        super().__init__()
        self.mode = mode
        if mode.startswith("up"):
            self.resample = nn.Sequential(nn.Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, dim // 2, 3, padding=1))
        else:
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
        if mode == "upsample3d":
            self.time_conv = CausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode == "downsample3d":
            self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))

    def forward(self, x: torch.Tensor, cache: TimeCache | None = None) -> torch.Tensor:
        if self.mode == "upsample3d" and cache is not None:
            x = self._double_frames(x, cache)
        t = x.shape[2]
        x = rearrange(self.resample(rearrange(x, "b c t h w -> (b t) c h w")), "(b t) c h w -> b c t h w", t=t)
        if self.mode == "downsample3d" and cache is not None:
            x = self._halve_frames(x, cache)
        return x

    def _double_frames(self, x: torch.Tensor, cache: TimeCache) -> torch.Tensor:
        before = cache.get()
        if before is None:  # the first latent stands for one frame: not doubled
            cache.put(TimeCache.FIRST)
            return x
        kept = x[:, :, -CACHE_FRAMES:].clone()
        if kept.shape[2] < CACHE_FRAMES:
            earlier = torch.zeros_like(kept) if before is TimeCache.FIRST else before[:, :, -1:].to(kept.device)
            kept = torch.cat([earlier, kept], 2)
        y = self.time_conv(x) if before is TimeCache.FIRST else self.time_conv(x, before)
        cache.put(kept)
        return rearrange(y, "b (two c) t h w -> b c (t two) h w", two=2)

    def _halve_frames(self, x: torch.Tensor, cache: TimeCache) -> torch.Tensor:
        before = cache.get()
        if before is None:  # the first frame passes alone
            cache.put(x.clone())
            return x
        kept = x[:, :, -1:].clone()
        x = self.time_conv(torch.cat([before[:, :, -1:], x], 2))
        cache.put(kept)
        return x


def run(layers: nn.Sequential, x: torch.Tensor, cache: TimeCache | None) -> torch.Tensor:
    for layer in layers:
        if isinstance(layer, CausalConv3d):
            x = cached(layer, x, cache)
        elif isinstance(layer, (ResidualBlock, Resample, AttentionBlock)):
            x = layer(x, cache)
        else:
            x = layer(x)
    return x


class Encoder3d(nn.Module):
    def __init__(self, c: VaeConfig):
        super().__init__()
        dims = [c.dim * u for u in (1, *c.dim_mult)]
        self.conv1 = CausalConv3d(3, dims[0], 3, padding=1)
        layers: list[nn.Module] = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(c.num_res_blocks):
                layers.append(ResidualBlock(in_dim, out_dim))
                in_dim = out_dim
            if i != len(c.dim_mult) - 1:
                layers.append(Resample(out_dim, "downsample3d" if c.temporal_downsample[i] else "downsample2d"))
        self.downsamples = nn.Sequential(*layers)
        top = dims[-1]
        self.middle = nn.Sequential(ResidualBlock(top, top), AttentionBlock(top), ResidualBlock(top, top))
        self.head = nn.Sequential(RmsNorm(top, images=False), nn.SiLU(), CausalConv3d(top, c.z_dim * 2, 3, padding=1))

    def forward(self, x: torch.Tensor, cache: TimeCache) -> torch.Tensor:
        x = cached(self.conv1, x, cache)
        return run(self.head, run(self.middle, run(self.downsamples, x, cache), cache), cache)


class Decoder3d(nn.Module):
    def __init__(self, c: VaeConfig):
        super().__init__()
        dims = [c.dim * u for u in (c.dim_mult[-1], *c.dim_mult[::-1])]
        temporal_upsample = c.temporal_downsample[::-1]
        self.conv1 = CausalConv3d(c.z_dim, dims[0], 3, padding=1)
        self.middle = nn.Sequential(ResidualBlock(dims[0], dims[0]), AttentionBlock(dims[0]),
                                    ResidualBlock(dims[0], dims[0]))
        layers: list[nn.Module] = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:  # the upsampler before this stage halved the channels
                in_dim //= 2
            for _ in range(c.num_res_blocks + 1):
                layers.append(ResidualBlock(in_dim, out_dim))
                in_dim = out_dim
            if i != len(c.dim_mult) - 1:
                layers.append(Resample(out_dim, "upsample3d" if temporal_upsample[i] else "upsample2d"))
        self.upsamples = nn.Sequential(*layers)
        self.head = nn.Sequential(RmsNorm(dims[-1], images=False), nn.SiLU(), CausalConv3d(dims[-1], 3, 3, padding=1))

    def forward(self, x: torch.Tensor, cache: TimeCache) -> torch.Tensor:
        x = cached(self.conv1, x, cache)
        return run(self.head, run(self.upsamples, run(self.middle, x, cache), cache), cache)


class VideoVae(nn.Module):
    """Frames in [-1, 1] <-> standardised latents [b, z_dim, 1 + (t - 1) / 4, h / 8, w / 8]."""

    def __init__(self, c: VaeConfig = VaeConfig()):
        super().__init__()
        self.config = c
        self.encoder = Encoder3d(c)
        self.conv1 = CausalConv3d(c.z_dim * 2, c.z_dim * 2, 1)
        self.conv2 = CausalConv3d(c.z_dim, c.z_dim, 1)
        self.decoder = Decoder3d(c)
        self.mean: torch.Tensor
        self.std: torch.Tensor
        self.register_buffer("mean", torch.tensor(c.latent_mean).view(1, -1, 1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(c.latent_std).view(1, -1, 1, 1, 1), persistent=False)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """The latents' means (no sampling), standardised. `video` holds 1 + 4k frames."""
        cache = TimeCache()
        parts = []
        for start in range(0, video.shape[2], 4):
            cache.rewind()
            chunk = video[:, :, :1] if start == 0 else video[:, :, start - 3 : start + 1]
            parts.append(self.encoder(chunk, cache))
        mu = self.conv1(torch.cat(parts, 2)).chunk(2, dim=1)[0]
        return (mu - self.mean.to(mu.dtype)) / self.std.to(mu.dtype)

    def decode_stream(self, latents: torch.Tensor, cache: TimeCache | None = None) -> Iterator[torch.Tensor]:
        """Each latent's frames in [-1, 1] as soon as they are decoded: 1, then 4 per latent; or 4
        for every latent when `cache` continues an earlier decode (its last frames, kept there)."""
        x = self.conv2(latents * self.std.to(latents.dtype) + self.mean.to(latents.dtype))
        cache = cache if cache is not None else TimeCache()
        for i in range(x.shape[2]):
            cache.rewind()
            yield self.decoder(x[:, :, i : i + 1], cache).clamp(-1, 1)
