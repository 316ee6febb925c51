"""Colour matching of generated frames to the photo (Reinhard transfer in CIELAB), frame by frame.

The model drifts in colour over a long stream; each decoded frame's L, a and b channels are
moved to the photo's mean and spread, as the official pipeline does before it re-encodes a
chunk's last frames. Per frame, so it works on a stream as each frame is decoded.
"""

from __future__ import annotations

import torch

SRGB_TO_XYZ = ((0.4124564, 0.3575761, 0.1804375),
               (0.2126729, 0.7151522, 0.0721750),
               (0.0193339, 0.1191920, 0.9503041))
XYZ_TO_SRGB = ((3.2404542, -1.5371385, -0.4985314),
               (-0.9692660, 1.8760108, 0.0415560),
               (0.0556434, -0.2040259, 1.0572252))
WHITE_D65 = (0.95047, 1.0, 1.08883)
EPSILON, KAPPA = 0.008856, 903.3  # CIE's threshold and slope of the linear segment


def rgb_to_lab(rgb: torch.Tensor) -> torch.Tensor:
    """sRGB in [0, 1] (channels last) -> CIELAB."""
    linear = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = linear @ torch.tensor(SRGB_TO_XYZ, dtype=rgb.dtype, device=rgb.device).T
    xyz = (xyz / torch.tensor(WHITE_D65, dtype=rgb.dtype, device=rgb.device)).clamp(1e-8, 1.0)
    f = torch.where(xyz > EPSILON, xyz ** (1 / 3), (KAPPA * xyz + 16) / 116)
    fx, fy, fz = f.unbind(-1)
    return torch.stack([116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)], -1)


def lab_to_rgb(lab: torch.Tensor) -> torch.Tensor:
    """CIELAB -> sRGB in [0, 1] (channels last)."""
    lightness, a, b = lab.unbind(-1)
    fy = (lightness + 16) / 116
    fx, fz = fy + a / 500, fy - b / 200
    x = torch.where(fx**3 > EPSILON, fx**3, (116 * fx - 16) / KAPPA)
    y = torch.where(lightness > KAPPA * EPSILON, fy**3, lightness / KAPPA)
    z = torch.where(fz**3 > EPSILON, fz**3, (116 * fz - 16) / KAPPA)
    xyz = torch.stack([x, y, z], -1) * torch.tensor(WHITE_D65, dtype=lab.dtype, device=lab.device)
    linear = xyz @ torch.tensor(XYZ_TO_SRGB, dtype=lab.dtype, device=lab.device).T
    rgb = torch.where(linear > 0.0031308, 1.055 * linear.clamp(min=0) ** (1 / 2.4) - 0.055, 12.92 * linear)
    return rgb.clamp(0.0, 1.0)


class ColorMatch:
    """Moves frames' colour statistics to the photo's; `strength` 0 leaves them as generated."""

    def __init__(self, reference: torch.Tensor, strength: float = 1.0):
        """reference: [1, 3, 1, h, w] in [-1, 1]."""
        lab = rgb_to_lab(self._channels_last(reference.float()))
        self.mean, self.std = lab.mean((2, 3), keepdim=True), lab.std((2, 3), keepdim=True, unbiased=False)
        self.strength = strength

    @staticmethod
    def _channels_last(frames: torch.Tensor) -> torch.Tensor:
        return ((frames + 1) / 2).permute(0, 2, 3, 4, 1)  # [b, t, h, w, 3] in [0, 1]

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        """frames: [1, 3, t, h, w] in [-1, 1]; each frame matched on its own."""
        if self.strength <= 0:
            return frames
        source = self._channels_last(frames.float())
        lab = rgb_to_lab(source)
        mean, std = lab.mean((2, 3), keepdim=True), lab.std((2, 3), keepdim=True, unbiased=False)
        std = torch.where(std < 1e-8, torch.ones_like(std), std)
        matched = lab_to_rgb((lab - mean) * (self.std / std) + self.mean)
        blended = (1 - self.strength) * source + self.strength * matched
        return (blended.permute(0, 4, 1, 2, 3) * 2 - 1).to(frames.dtype)
