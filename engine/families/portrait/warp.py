"""Thin-plate-spline displacement fields over a fixed set of control points.

The control points are fixed per portrait, so the TPS system and the kernel between
the grid and the centres are factored once; a frame then costs two small matrix
products. Fields are forward (reference -> frame); `invert` turns one into the
backward map that cv2.remap needs.
"""

from __future__ import annotations

import cv2
import numpy as np


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return 0.5 * d2 * np.log(d2 + 1e-9)  # r^2 log r, written with r^2


class TpsGrid:
    """Dense TPS interpolation of control-point displacements onto a regular grid."""

    def __init__(self, centres: np.ndarray, box: tuple[int, int, int, int], step: int, smooth: float = 1.0):
        x0, y0, x1, y1 = box
        self.box, self.step = box, step
        xs = np.arange(x0, x1 + step, step, dtype=np.float32)
        ys = np.arange(y0, y1 + step, step, dtype=np.float32)
        gx, gy = np.meshgrid(xs, ys)
        self.grid = np.stack([gx, gy], -1)  # (H, W, 2) pixel coordinates
        n = len(centres)
        system = np.zeros((n + 3, n + 3), np.float64)
        system[:n, :n] = _kernel(centres, centres) + smooth * np.eye(n)
        system[:n, n] = system[n, :n] = 1
        system[:n, n + 1 :] = centres
        system[n + 1 :, :n] = centres.T
        self._solve = np.linalg.inv(system)[:, :n].astype(np.float32)  # values -> weights
        flat = self.grid.reshape(-1, 2)
        rows = [np.hstack([_kernel(flat[i : i + 4096], centres), np.ones((len(flat[i : i + 4096]), 1)),
                           flat[i : i + 4096]]) for i in range(0, len(flat), 4096)]
        self._eval = (np.vstack(rows) @ self._solve).astype(np.float32)  # (G, n): values -> field

    def field(self, values: np.ndarray) -> np.ndarray:
        """Displacement (H, W, 2) at the grid for control-point displacements (n, 2)."""
        return (self._eval @ values).reshape(self.grid.shape)


def invert(forward: np.ndarray, grid: np.ndarray, step: int, iterations: int = 3) -> np.ndarray:
    """Source coordinates s with s + forward(s) = p for every grid point p (fixed point)."""
    source = grid - forward
    x0, y0 = grid[0, 0]
    for _ in range(iterations):
        gx = ((source[..., 0] - x0) / step).astype(np.float32)
        gy = ((source[..., 1] - y0) / step).astype(np.float32)
        sampled = cv2.remap(forward, gx, gy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        source = grid - sampled
    return source
