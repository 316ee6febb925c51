"""Log-mel audio features for the motion model: two 20 ms rows per 40 ms video frame.

48 kHz PCM is decimated to 16 kHz, then 32 ms Hann windows every 20 ms go through a
40-band mel filterbank (80 Hz - 7.6 kHz). A frame's row is its two windows side by
side, the later one ending at the frame's end; the tail of the previous chunk lives in
the RollingState, so a stream cut into chunks of any size gives the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.core.module import Module

RATE = 16_000
HOP = SAMPLES_PER_FRAME // 3 // 2  # 320 samples (20 ms) at 16 kHz
WINDOW = 512
BANDS = 40
DIM = 2 * BANDS
FLOOR = 1e-6
SILENCE = float(np.log10(FLOOR))
"""The value of every feature over digital silence (a session starts from it)."""


def mel_filters(bands: int = BANDS, low: float = 80.0, high: float = 7600.0) -> np.ndarray:
    """(bands, WINDOW // 2 + 1) triangular filters, equally spaced on the mel scale."""
    mel: Callable[[float], float] = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(low), mel(high), bands + 2) / 2595) - 1)
    freqs = np.fft.rfftfreq(WINDOW, 1 / RATE)
    rise = (freqs[None] - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]
    fall = (edges[2:, None] - freqs[None]) / (edges[2:] - edges[1:-1])[:, None]
    return np.maximum(0, np.minimum(rise, fall)).astype(np.float32)


def decimate(pcm48: np.ndarray) -> np.ndarray:
    """48 kHz int16 -> 16 kHz float in -1..1 (boxcar average: enough for speech bands)."""
    return pcm48.astype(np.float32).reshape(-1, 3).mean(1) / 32768.0


@dataclass
class AudioTail:
    """A feature module's state: the samples of its last window that overlap the next chunk."""

    tail: np.ndarray

    @classmethod
    def silent(cls, samples: int) -> AudioTail:
        return cls(np.zeros(samples, np.float32))

    def extend(self, pcm48: np.ndarray) -> np.ndarray:
        """This chunk's 16 kHz signal after the held tail; keeps the new tail (as long as the old)."""
        signal = np.concatenate([self.tail, decimate(pcm48)])
        self.tail = signal[len(signal) - len(self.tail):].copy()
        return signal


class MelFeatureModule(Module):
    """(frames, 80) log-mel rows; see the module docstring."""

    name = "mel_features"

    def __init__(self) -> None:
        super().__init__()
        self._filters = mel_filters()
        self._window = np.hanning(WINDOW).astype(np.float32)

    def initial_state(self, seed: int) -> AudioTail:
        return AudioTail.silent(WINDOW - HOP)

    def __call__(self, pcm48: np.ndarray, frames: int, state: AudioTail) -> np.ndarray:
        signal = state.extend(pcm48)
        starts = np.arange(2 * frames) * HOP
        rows = signal[starts[:, None] + np.arange(WINDOW)] * self._window
        power = np.abs(np.fft.rfft(rows, axis=1)) ** 2
        logmel = np.log10(power @ self._filters.T + FLOOR).astype(np.float32)
        return logmel.reshape(frames, DIM)
