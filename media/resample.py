"""Sound to s16 mono at one rate, streaming (FFmpeg's resampler keeps its filter state
between pieces): microphones, agents' PCM, uploaded clips and files all come in this way."""

from __future__ import annotations

from collections.abc import Iterator

import av
import numpy as np

from .clock import SAMPLE_RATE


class MonoResampler:
    def __init__(self, rate: int = SAMPLE_RATE):
        self.rate = rate
        self._av = av.AudioResampler("s16", "mono", rate)

    def frame(self, frame: av.AudioFrame | None) -> Iterator[np.ndarray]:
        """One decoded frame's samples (any layout and rate); None flushes what is held."""
        for out in self._av.resample(frame):
            yield out.to_ndarray().reshape(-1)

    def pcm(self, pcm: np.ndarray, rate: int) -> np.ndarray:
        """s16 mono samples at `rate` (passed through when that is already ours)."""
        if rate == self.rate:
            return pcm
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = rate
        out = list(self.frame(frame))
        return np.concatenate(out) if out else np.zeros(0, np.int16)
