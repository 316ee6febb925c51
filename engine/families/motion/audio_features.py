"""Per-frame audio features from 48 kHz PCM: loudness and spectral shape.

One feature row per 40 ms video frame, computed over a 64 ms window that ends at
the frame's end (the tail of the previous chunk is kept in the RollingState).
"""

from __future__ import annotations

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.core.module import Module
from engine.families.motion.mel_features import AudioTail

RATE = 16_000
HOP = SAMPLES_PER_FRAME // 3  # 640 samples at 16 kHz
WINDOW = 1024
FEATURES = ("loudness_db", "centroid", "low_ratio", "high_ratio", "zcr")


class AudioFeatureModule(Module):
    """Loudness (dBFS), spectral centroid (kHz / 4), low/high band energy shares, zero-crossing rate."""

    name = "audio_features"

    def __init__(self) -> None:
        super().__init__()
        freqs = np.fft.rfftfreq(WINDOW, 1 / RATE)
        self._freqs = freqs.astype(np.float32)
        self._low = freqs < 900
        self._high = freqs > 3000
        self._window = np.hanning(WINDOW).astype(np.float32)

    def initial_state(self, seed: int) -> AudioTail:
        return AudioTail.silent(WINDOW - HOP)

    def __call__(self, pcm48: np.ndarray, frames: int, state: AudioTail) -> np.ndarray:
        signal = state.extend(pcm48)
        rows = np.stack([signal[i * HOP : i * HOP + WINDOW] for i in range(frames)])
        return self._features(rows)

    def _features(self, rows: np.ndarray) -> np.ndarray:
        rms = np.sqrt((rows[:, -HOP:] ** 2).mean(1) + 1e-10)
        power = np.abs(np.fft.rfft(rows * self._window, axis=1)) ** 2 + 1e-12
        total = power.sum(1)
        centroid = (power * self._freqs).sum(1) / total / 4000.0
        signs = np.signbit(rows[:, -HOP:])
        zcr = (signs[:, 1:] != signs[:, :-1]).mean(1)
        return np.stack(
            [20 * np.log10(rms), centroid, power[:, self._low].sum(1) / total,
             power[:, self._high].sum(1) / total, zcr], 1,
        ).astype(np.float32)
