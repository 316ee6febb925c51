"""Flow-matching Euler sampler (rectified flow), in the shape of diffusers' schedulers.

Convention: x(sigma) = sigma * noise + (1 - sigma) * x0, sigma from 1 (noise) to 0 (data);
the model predicts the velocity v = noise - x0. A shift > 1 spends more steps at high
noise: sigma' = shift * sigma / (1 + (shift - 1) * sigma). Steps are computed in fp32
whatever the model's dtype, because bf16 sigma differences lose the last steps.
"""

from __future__ import annotations

import torch

from .sigmas import flow_sigmas


class FlowMatchScheduler:
    def __init__(self, shift: float = 1.0):
        if shift <= 0:
            raise ValueError("shift must be positive")
        self.shift = shift
        self.sigmas = torch.tensor([1.0, 0.0])

    def set_timesteps(self, steps: int) -> torch.Tensor:
        """Sigmas for `steps` Euler steps: steps + 1 values from 1 down to exactly 0."""
        self.sigmas = torch.from_numpy(flow_sigmas(steps, self.shift))
        return self.sigmas

    @property
    def timesteps(self) -> torch.Tensor:
        """Model time per step (sigma scaled to 0..1000, as DiTs are usually conditioned)."""
        return self.sigmas[:-1] * 1000

    def step(self, velocity: torch.Tensor, sample: torch.Tensor, index: int) -> torch.Tensor:
        """One Euler step from sigmas[index] to sigmas[index + 1]."""
        delta = self.sigmas[index + 1] - self.sigmas[index]
        out = sample.to(torch.float32) + delta * velocity.to(torch.float32)
        return out.to(sample.dtype)

    @staticmethod
    def add_noise(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        """The training interpolation, for flow-matching losses."""
        return sigma * noise + (1 - sigma) * x0
