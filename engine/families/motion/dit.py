"""MotionDiT: the trained audio-to-motion model, a small flow-matching DiT (numpy inference).

It sees a window of `window` video frames. Each token is one frame: its motion (clean
where known, noisy where generated), a known flag and the frame's log-mel row, plus a
learned position. The noise level enters through adaLN-Zero modulation, as in DiT. The
same network makes both chunk kinds of the N/I schedule: an N chunk knows the window's
first `window - chunk` frames (the boundary motion of what came before) and generates
the rest; an I chunk knows everything but the frames it interpolates.

Training (PyTorch) lives in training/motion/; the engine runs this numpy port of the
same forward so the worker stays free of torch. A unit test holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.core import motion
from engine.core.module import Module, saved_config
from engine.families.motion.speech_features import DIM as AUDIO_DIM
from engine.package_files import package_path

WEIGHTS = package_path("engine", "weights", "motion_dit.safetensors")


@dataclass(frozen=True)
class MotionDiTConfig:
    dim: int = 128
    depth: int = 3
    heads: int = 4
    window: int = 10
    """Frames the model sees at once."""
    chunk: int = 2
    """Frames an N chunk generates (the rest of the window is boundary conditioning)."""
    lookahead: int = 0
    """Frames of audio the model hears beyond the frame it moves: the token of frame t carries
    the features of frame t + lookahead, so the motion it makes lags the audio by that much
    and the playout delays the audio to match (engine/families/motion/delay.py)."""
    mlp_ratio: int = 2
    motion_dim: int = motion.DIM
    audio_dim: int = AUDIO_DIM
    freq_dim: int = 256


def timestep_embedding(sigma: np.ndarray, dim: int) -> np.ndarray:
    """Sinusoidal embedding of model time sigma * 1000 -> (B, dim)."""
    half = dim // 2
    freqs = np.exp(-np.log(10000.0) * np.arange(half, dtype=np.float32) / half)
    args = (np.asarray(sigma, np.float32) * 1000.0)[:, None] * freqs[None]
    return np.concatenate([np.cos(args), np.sin(args)], 1).astype(np.float32)


def _linear(p: dict, name: str, x: np.ndarray) -> np.ndarray:
    # as one 2-D product: numpy's stacked matmul skips BLAS and is several times slower
    out = x.reshape(-1, x.shape[-1]) @ p[f"{name}.weightT"] + p[f"{name}.bias"]
    return out.reshape(*x.shape[:-1], -1)


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def gelu(x: np.ndarray) -> np.ndarray:  # tanh approximation, as trained
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))  # x*x*x: ** is slow


def _norm(x: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-6)


class MotionDiT(Module):
    """Loads the committed weights; `velocity` is one forward, `sample` a whole chunk."""

    name = "motion_dit"

    def __init__(self, checkpoint: Path = WEIGHTS):
        super().__init__(checkpoint)
        # the committed weights' metadata also carries sampler settings, now SamplerConfig's
        self.config = saved_config(checkpoint, MotionDiTConfig)
        self.prepare()

    def prepare(self) -> None:
        self.p = _prepared(self.params)
        self._conditions: dict[float, list[list[np.ndarray]]] = {}

    def velocity(self, x: np.ndarray, known: np.ndarray, audio: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """x (B, W, M) normalised motion, known (B, W), audio (B, W, A) normalised, sigma (B,) -> (B, W, M)."""
        p, c = self.p, self.config
        h = _linear(p, "motion_in", np.concatenate([x, known[..., None]], -1)) + _linear(p, "audio_in", audio)
        h = h + p["pos"][None, : h.shape[1]]
        modulations = self.modulations(sigma)
        for i in range(c.depth):
            h = self._block(h, modulations[i], f"blocks.{i}")
        shift, scale = modulations[-1]
        return _linear(p, "final.out", _norm(h) * (1 + scale) + shift)

    def modulations(self, sigma: np.ndarray) -> list[list[np.ndarray]]:
        """Each block's adaLN shift/scale/gate for noise level sigma; they depend on nothing else,
        so a sampler with a fixed schedule computes them once per sigma (cached for batch 1)."""
        key = float(sigma[0]) if len(sigma) == 1 else None
        if key is not None and key in self._conditions:
            return self._conditions[key]
        p = self.p
        cond = _linear(p, "t_in.2", _silu(_linear(p, "t_in.0", timestep_embedding(sigma, self.config.freq_dim))))
        cond = _silu(cond)[:, None]
        out = [np.split(_linear(p, f"blocks.{i}.ada", cond), 6, -1) for i in range(self.config.depth)]
        out.append(np.split(_linear(p, "final.ada", cond), 2, -1))
        if key is not None and len(self._conditions) < 64:  # a schedule has a handful of sigmas
            self._conditions[key] = out
        return out

    def _block(self, h: np.ndarray, modulation: list[np.ndarray], name: str) -> np.ndarray:
        p, heads = self.p, self.config.heads
        shift1, scale1, gate1, shift2, scale2, gate2 = modulation
        b, w, d = h.shape
        qkv = _linear(p, f"{name}.qkv", _norm(h) * (1 + scale1) + shift1)
        q, k, v = (t.reshape(b, w, heads, d // heads).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, -1))
        scores = q @ k.transpose(0, 1, 3, 2) * float((d // heads) ** -0.5)  # a numpy scalar would make it float64
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attended = (scores / scores.sum(-1, keepdims=True)) @ v
        h = h + gate1 * _linear(p, f"{name}.proj", attended.transpose(0, 2, 1, 3).reshape(b, w, d))
        hidden = gelu(_linear(p, f"{name}.fc1", _norm(h) * (1 + scale2) + shift2))
        return h + gate2 * _linear(p, f"{name}.fc2", hidden)

    # -- chunk sampling, in raw motion units -------------------------------------------------

    def normalise(self, motion_: np.ndarray, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.p
        return ((motion_ - p["motion_mean"]) / p["motion_std"],
                (features - p["feature_mean"]) / p["feature_std"])

    def sample(self, window_motion: np.ndarray, known: np.ndarray, features: np.ndarray,
               noise: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
        """Fill the unknown frames of one window by Euler steps from `noise`; known frames stay.

        window_motion (W, M) raw (unknown rows ignored), known (W,) bool, features (W, A) raw,
        noise (W, M) standard normal, sigmas from 1 to 0. Returns the window (W, M), raw units.
        """
        x, audio = self.normalise(window_motion, features)
        x = np.where(known[:, None], x, noise).astype(np.float32)
        flag = known.astype(np.float32)[None]
        for i in range(len(sigmas) - 1):
            v = self.velocity(x[None], flag, audio[None], sigmas[i: i + 1])[0]
            x = np.where(known[:, None], x, x + (sigmas[i + 1] - sigmas[i]) * v).astype(np.float32)
        return x * self.p["motion_std"] + self.p["motion_mean"]


def _prepared(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 weights, each linear's matrix stored transposed and contiguous for x @ W."""
    out = {k: np.asarray(v, np.float32) for k, v in params.items()}
    for k in [k for k in out if k.endswith(".weight")]:
        out[k[: -len("weight")] + "weightT"] = np.ascontiguousarray(out.pop(k).T)
    return out
