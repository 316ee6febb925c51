"""The MotionDiT in PyTorch, for training; parameter names match engine/families/motion/dit.py."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from engine.families.motion.dit import MotionDiTConfig


def timestep_embedding(sigma: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = (sigma.float() * 1000.0)[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], 1)


def _norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], eps=1e-6)


class Block(nn.Module):
    def __init__(self, c: MotionDiTConfig):
        super().__init__()
        self.heads = c.heads
        self.ada = nn.Linear(c.dim, 6 * c.dim)
        self.qkv = nn.Linear(c.dim, 3 * c.dim)
        self.proj = nn.Linear(c.dim, c.dim)
        self.fc1 = nn.Linear(c.dim, c.mlp_ratio * c.dim)
        self.fc2 = nn.Linear(c.mlp_ratio * c.dim, c.dim)
        nn.init.zeros_(self.ada.weight)  # adaLN-Zero: each block starts as the identity
        nn.init.zeros_(self.ada.bias)

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(cond).chunk(6, -1)
        b, w, d = h.shape
        q, k, v = (t.reshape(b, w, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(_norm(h) * (1 + scale1) + shift1).chunk(3, -1))
        attended = F.scaled_dot_product_attention(q, k, v)
        h = h + gate1 * self.proj(attended.transpose(1, 2).reshape(b, w, d))
        hidden = F.gelu(self.fc1(_norm(h) * (1 + scale2) + shift2), approximate="tanh")
        return h + gate2 * self.fc2(hidden)


class Final(nn.Module):
    def __init__(self, c: MotionDiTConfig):
        super().__init__()
        self.ada = nn.Linear(c.dim, 2 * c.dim)
        self.out = nn.Linear(c.dim, c.motion_dim)
        for layer in (self.ada, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)


class MotionDiT(nn.Module):
    def __init__(self, c: MotionDiTConfig):
        super().__init__()
        self.config = c
        self.motion_in = nn.Linear(c.motion_dim + 1, c.dim)
        self.audio_in = nn.Linear(c.audio_dim, c.dim)
        self.pos = nn.Parameter(torch.randn(c.window, c.dim) * 0.02)
        self.t_in = nn.Sequential(nn.Linear(c.freq_dim, c.dim), nn.SiLU(), nn.Linear(c.dim, c.dim))
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.depth))
        self.final = Final(c)
        for name in ("motion_mean", "motion_std"):
            self.register_buffer(name, torch.zeros(c.motion_dim) if "mean" in name else torch.ones(c.motion_dim))
        for name in ("feature_mean", "feature_std"):
            self.register_buffer(name, torch.zeros(c.audio_dim) if "mean" in name else torch.ones(c.audio_dim))

    def forward(self, x: torch.Tensor, known: torch.Tensor, audio: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """Same contract as the numpy `velocity`: normalised inputs -> velocity (B, W, M)."""
        h = self.motion_in(torch.cat([x, known[..., None]], -1)) + self.audio_in(audio) + self.pos[None, : x.shape[1]]
        cond = F.silu(self.t_in(timestep_embedding(sigma, self.config.freq_dim)))[:, None]
        for block in self.blocks:
            h = block(h, cond)
        shift, scale = self.final.ada(cond).chunk(2, -1)
        return self.final.out(_norm(h) * (1 + scale) + shift)

    def numpy_params(self) -> dict:
        return {k: v.detach().cpu().float().numpy().copy() for k, v in self.state_dict().items()}
