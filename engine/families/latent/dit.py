"""The audio-to-video DiT of SoulX-FlashHead (a Wan2.1-style transformer over video latents).

Patches of the noisy latents (beside the reference image's latents) attend to each other with a
3-axis rotary embedding, then each latent frame's patches cross-attend to that frame's audio
tokens; a timestep embedding modulates every block (adaLN, six vectors per block). Parameter
names follow the official checkpoint, so its safetensors load as they are
(tests/unit/test_latent_parity.py holds the names, shapes and outputs to the official code).
Plain PyTorch with SDPA attention: no flash-attn or custom kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .config import DitConfig

ROPE_THETA = 10000.0
ROPE_POSITIONS = 1024


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def timestep_features(dim: int, t: torch.Tensor) -> torch.Tensor:
    """cos | sin features of the timestep (float64 angles, as the model was trained)."""
    half = dim // 2
    rates = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64, device=t.device) / half)
    angles = torch.outer(t.double(), rates)
    return torch.cat([angles.cos(), angles.sin()], 1)


def _axis_angles(dim: int, count: int) -> torch.Tensor:
    """Rotation angles of one axis's `count` channel pairs at each position: [positions, count]."""
    inv = 1.0 / ROPE_THETA ** (torch.arange(0, dim, 2, dtype=torch.float64)[: dim // 2] / dim)
    assert len(inv) == count, "head_dim must split evenly over the three axes"
    return torch.outer(torch.arange(ROPE_POSITIONS, dtype=torch.float64), inv)


class Rope3d(nn.Module):
    """Rotary embedding over (frame, row, column): a third of each head's channel pairs per axis."""

    def __init__(self, head_dim: int):
        super().__init__()
        pairs = head_dim // 2
        counts = (pairs - 2 * (pairs // 3), pairs // 3, pairs // 3)
        dims = (head_dim - 2 * (head_dim // 3), head_dim // 3, head_dim // 3)
        self.angles = [_axis_angles(d, c) for d, c in zip(dims, counts)]
        self._made: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # a stream uses one grid

    def tables(self, grid: tuple[int, int, int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for every patch token in (f h w) order: [tokens, 1, pairs]."""
        key = (grid, str(device))
        if key not in self._made:
            if len(self._made) > 4:
                self._made.clear()
            self._made[key] = self._tables(grid, device)
        return self._made[key]

    def _tables(self, grid: tuple[int, int, int], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        f, h, w = grid
        a_f, a_h, a_w = (a[:n] for a, n in zip(self.angles, grid))
        angles = torch.cat([a_f[:, None, None].expand(f, h, w, -1), a_h[None, :, None].expand(f, h, w, -1),
                            a_w[None, None].expand(f, h, w, -1)], -1).reshape(f * h * w, 1, -1)
        return angles.cos().float().to(device), angles.sin().float().to(device)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [b, s, n, d] with consecutive channel pairs rotated by the tables' angles."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2).to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """SDPA over [b, s, heads * d] tensors."""
    q, k, v = (rearrange(t, "b s (n d) -> b n s d", n=heads) for t in (q, k, v))
    return rearrange(F.scaled_dot_product_attention(q, k, v), "b n s d -> b s (n d)")


class Projections(nn.Module):
    """q, k, v and o, with RMS-normed queries and keys (both attentions of a block)."""

    def __init__(self, dim: int, heads: int, eps: float):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q, self.norm_k = RMSNorm(dim, eps), RMSNorm(dim, eps)


Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


class SelfAttention(Projections):
    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                attend: Attend = attention) -> torch.Tensor:
        """`attend`: SDPA here, or across a process group's shares of the tokens (parallel.py)."""
        b, s, _ = x.shape
        q = rotate(self.norm_q(self.q(x)).reshape(b, s, self.heads, -1), cos, sin).flatten(2)
        k = rotate(self.norm_k(self.k(x)).reshape(b, s, self.heads, -1), cos, sin).flatten(2)
        return self.o(attend(q, k, self.v(x), self.heads))


class CrossAttention(Projections):
    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        q, k = self.norm_q(self.q(x)), self.norm_k(self.k(context))
        return self.o(attention(q, k, self.v(context), self.heads))


class DitBlock(nn.Module):
    """Self-attention, per-frame audio cross-attention, feed-forward; adaLN from the timestep."""

    def __init__(self, c: DitConfig):
        super().__init__()
        self.self_attn = SelfAttention(c.dim, c.num_heads, c.eps)
        self.cross_attn = CrossAttention(c.dim, c.num_heads, c.eps)
        self.norm1 = nn.LayerNorm(c.dim, eps=c.eps, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(c.dim, eps=c.eps, elementwise_affine=False)
        self.norm3 = nn.LayerNorm(c.dim, eps=c.eps)
        self.ffn = nn.Sequential(nn.Linear(c.dim, c.ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(c.ffn_dim, c.dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, c.dim) / c.dim**0.5)

    def forward(self, x: torch.Tensor, context: torch.Tensor, t_mod: torch.Tensor,
                cos: torch.Tensor, sin: torch.Tensor, attend: Attend = attention) -> torch.Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = (self.modulation.to(t_mod.dtype) + t_mod).chunk(6, dim=1)
        x = x + self.self_attn(self.norm1(x) * (1 + scale1) + shift1, cos, sin, attend) * gate1
        frames = context.shape[1]  # each latent frame's patches hear only that frame's audio
        per_frame = rearrange(self.norm3(x), "b (f l) c -> (b f) l c", f=frames)
        heard = self.cross_attn(per_frame, rearrange(context, "b f m c -> (b f) m c"))
        x = x + rearrange(heard, "(b f) l c -> b (f l) c", f=frames)
        return x + self.ffn(self.norm2(x) * (1 + scale2) + shift2) * gate2


class Head(nn.Module):
    def __init__(self, c: DitConfig):
        super().__init__()
        self.norm = nn.LayerNorm(c.dim, eps=c.eps, elementwise_affine=False)
        self.head = nn.Linear(c.dim, c.out_dim * math.prod(c.patch_size))
        self.modulation = nn.Parameter(torch.randn(1, 2, c.dim) / c.dim**0.5)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        shift, scale = (self.modulation.to(t.dtype) + t[:, None]).chunk(2, dim=1)
        return self.head(self.norm(x) * (1 + scale) + shift)


class Mlp(nn.Module):
    """In the checkpoint (`audio_emb`), not used by the forward pass."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.proj = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, in_dim), nn.GELU(),
                                  nn.Linear(in_dim, out_dim), nn.LayerNorm(out_dim))


class AudioProjection(nn.Module):
    """wav2vec2 windows -> `audio_tokens` context tokens per latent frame.

    The first latent frame (one video frame) hears its full window; every later latent frame
    (vae_stride[0] video frames) hears a window built from its frames' windows: the first frame's
    past and centre, the middle frames' centres, the last frame's centre and future.
    """

    def __init__(self, c: DitConfig):
        super().__init__()
        per_frame = c.audio_layers * c.audio_dim
        later_window = c.audio_window + c.vae_stride[0] - 1
        self.proj1 = nn.Linear(c.audio_window * per_frame, c.audio_hidden)
        self.proj1_vf = nn.Linear(later_window * per_frame, c.audio_hidden)
        self.proj2 = nn.Linear(c.audio_hidden, c.audio_hidden)
        self.proj3 = nn.Linear(c.audio_hidden, c.audio_tokens * c.dim)
        self.norm = nn.LayerNorm(c.dim)
        self.tokens, self.stride, self.mid = c.audio_tokens, c.vae_stride[0], c.audio_window // 2

    def later_windows(self, later: torch.Tensor) -> torch.Tensor:
        """[b, (n stride), w, s, c] video frames -> [b, n, stride + w - 1, s, c] per latent frame."""
        groups = rearrange(later, "b (n k) w s c -> b n k w s c", k=self.stride)
        first = groups[:, :, :1, : self.mid + 1].flatten(2, 3)
        middle = groups[:, :, 1:-1, self.mid : self.mid + 1].flatten(2, 3)
        last = groups[:, :, -1:, self.mid :].flatten(2, 3)
        return torch.cat([first, middle, last], 2)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """audio [b, 1 + n * stride, window, layers, dim] -> [b, 1 + n, tokens, model dim]."""
        first = torch.relu(self.proj1(audio[:, 0].flatten(1)))[:, None]
        later = torch.relu(self.proj1_vf(self.later_windows(audio[:, 1:]).flatten(2)))
        tokens = self.proj3(torch.relu(self.proj2(torch.cat([first, later], 1))))
        tokens = tokens.unflatten(-1, (self.tokens, -1))
        n = self.norm  # in float32 whatever the weights' precision, as the official model does
        return F.layer_norm(tokens.float(), n.normalized_shape, n.weight.float(), n.bias.float(), n.eps).to(audio.dtype)


class Embedded(NamedTuple):
    tokens: torch.Tensor  # [b, f h w, dim] patches
    grid: tuple[int, ...]  # (f, h, w) patches
    t: torch.Tensor  # [b, dim] timestep embedding (the head's modulation)
    t_mod: torch.Tensor  # [b, 6, dim] the blocks' modulation
    cos: torch.Tensor
    sin: torch.Tensor
    context: torch.Tensor  # [b, f, tokens, dim] audio per latent frame


class FlashHeadDit(nn.Module):
    """Predicts the flow (noise - clean latents) of a chunk's latents at one timestep."""

    def __init__(self, c: DitConfig):
        super().__init__()
        self.config = c
        self.patch_embedding = nn.Conv3d(c.in_dim, c.dim, kernel_size=c.patch_size, stride=c.patch_size)
        self.text_embedding = nn.Sequential(nn.Linear(c.text_dim, c.dim), nn.GELU(approximate="tanh"),
                                            nn.Linear(c.dim, c.dim))  # in the checkpoint, unused
        self.time_embedding = nn.Sequential(nn.Linear(c.freq_dim, c.dim), nn.SiLU(), nn.Linear(c.dim, c.dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(c.dim, c.dim * 6))
        self.blocks = nn.ModuleList(DitBlock(c) for _ in range(c.num_layers))
        self.head = Head(c)
        self.audio_emb = Mlp(c.audio_dim, c.dim)
        self.audio_proj = AudioProjection(c)
        self.rope = Rope3d(c.head_dim)

    def embed(self, x: torch.Tensor, timestep: torch.Tensor, audio: torch.Tensor, ref: torch.Tensor) -> Embedded:
        """Tokens, rope tables, timestep embedding and its six modulations, audio context."""
        x = self.patch_embedding(torch.cat([x, ref], 1))
        f, h, w = x.shape[2:]
        grid = (f, h, w)
        cos, sin = self.rope.tables(grid, x.device)
        # the timestep is rounded to the weights' precision first, as in training
        t = self.time_embedding(timestep_features(self.config.freq_dim, timestep.to(x.dtype)).to(x.dtype))
        t_mod = self.time_projection(t).unflatten(1, (6, -1))
        context = self.audio_proj(audio.to(x.dtype))
        return Embedded(rearrange(x, "b c f h w -> b (f h w) c"), grid, t, t_mod, cos, sin, context)

    def unpatchify(self, x: torch.Tensor, grid: tuple[int, ...]) -> torch.Tensor:
        f, h, w = grid
        pf, ph, pw = self.config.patch_size
        return rearrange(x, "b (f h w) (x y z c) -> b c (f x) (h y) (w z)", f=f, h=h, w=w, x=pf, y=ph, z=pw)

    def forward(self, x: torch.Tensor, timestep: torch.Tensor, audio: torch.Tensor, ref: torch.Tensor,
                run_blocks: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
        """x, ref [b, 16, f, h, w] latents; timestep [b]; audio [b, 1 + 4 (f - 1), 5, 12, 768].

        `run_blocks(x, context, t_mod, cos, sin)` replaces the plain loop over the blocks
        (engine.accel.offload.BlockOffloader runs them from host memory)."""
        e = self.embed(x, timestep, audio, ref)
        tokens = e.tokens
        if run_blocks is None:
            for block in self.blocks:
                tokens = block(tokens, e.context, e.t_mod, e.cos, e.sin)
        else:
            tokens = run_blocks(tokens, e.context, e.t_mod, e.cos, e.sin)
        return self.unpatchify(self.head(tokens, e.t), e.grid)
