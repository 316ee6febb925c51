"""Phonemes -> visemes -> mouth-coefficient curves, with coarticulation.

Every synthesiser names its phonemes differently (piper and espeak-ng speak IPA, flite
and pocketsphinx ARPAbet); all of them are mapped to one small viseme set here. A
viseme has a mouth target and a dominance (Cohen-Massaro): strong visemes (p/b/m, f/v,
w) impose their shape, weak ones (h, schwa) take their neighbours'. Curves are the
dominance-weighted blend of targets, sampled at video-frame centres; p/b/m then close
the lips outright in the frame nearest their centre, since a blend never quite does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import FPS
from engine.core import motion

# viseme: (jaw_open, lip_width, lip_round, upper_lip, lower_lip, smile), dominance
VISEMES: dict[str, tuple[tuple[float, ...], float]] = {
    "sil": ((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), 0.25),
    "BMP": ((0.0, 0.0, 0.05, 0.0, 0.0, 0.0), 1.0),
    "FV": ((0.08, 0.1, 0.0, 0.15, -0.6, 0.0), 0.9),
    "TH": ((0.14, 0.1, 0.0, 0.1, -0.2, 0.0), 0.6),
    "ALV": ((0.13, 0.15, 0.0, 0.05, 0.0, 0.0), 0.45),
    "S": ((0.07, 0.25, 0.0, 0.05, 0.0, 0.05), 0.6),
    "SH": ((0.12, -0.3, 0.5, 0.3, 0.1, 0.0), 0.7),
    "K": ((0.22, 0.05, 0.0, 0.0, 0.0, 0.0), 0.3),
    "H": ((0.25, 0.0, 0.0, 0.0, 0.0, 0.0), 0.1),
    "R": ((0.15, -0.3, 0.5, 0.15, 0.0, 0.0), 0.5),
    "W": ((0.08, -0.6, 0.9, 0.1, 0.0, 0.0), 0.9),
    "Y": ((0.12, 0.45, 0.0, 0.0, 0.0, 0.05), 0.5),
    "IY": ((0.16, 0.6, 0.0, 0.05, 0.0, 0.1), 0.6),
    "IH": ((0.24, 0.4, 0.0, 0.0, 0.0, 0.05), 0.5),
    "EH": ((0.36, 0.35, 0.0, 0.0, 0.1, 0.0), 0.5),
    "AE": ((0.5, 0.4, 0.0, 0.05, 0.1, 0.0), 0.55),
    "AA": ((0.65, 0.0, 0.0, 0.05, 0.15, 0.0), 0.6),
    "AH": ((0.45, 0.05, 0.0, 0.0, 0.1, 0.0), 0.5),
    "AO": ((0.5, -0.3, 0.5, 0.05, 0.1, 0.0), 0.6),
    "OW": ((0.35, -0.4, 0.65, 0.05, 0.05, 0.0), 0.6),
    "UH": ((0.2, -0.4, 0.6, 0.05, 0.0, 0.0), 0.55),
    "UW": ((0.12, -0.6, 0.9, 0.1, 0.0, 0.0), 0.7),
    "ER": ((0.25, -0.2, 0.4, 0.1, 0.0, 0.0), 0.5),
    "AX": ((0.25, 0.0, 0.0, 0.0, 0.0, 0.0), 0.2),
}
OPEN_VOWELS = ("AA", "AE", "AH", "AO")
ROUNDED = ("UW", "OW", "UH", "W")  # lips pushed forward and together: o, u, w
SPREAD = ("IY", "IH", "EH")  # lips drawn back: ee, i, e


def rounding_sign(viseme: str) -> int:
    """+1 for a rounded sound, -1 for a spread one, 0 for the rest."""
    return 1 if viseme in ROUNDED else -1 if viseme in SPREAD else 0

IPA: dict[str, str] = {
    "p": "BMP", "b": "BMP", "m": "BMP", "f": "FV", "v": "FV", "θ": "TH", "ð": "TH",
    "t": "ALV", "d": "ALV", "n": "ALV", "l": "ALV", "ɫ": "ALV", "ɾ": "ALV", "s": "S", "z": "S",
    "ʃ": "SH", "ʒ": "SH", "k": "K", "ɡ": "K", "g": "K", "ŋ": "K", "x": "K", "ʔ": "K",
    "h": "H", "r": "R", "ɹ": "R", "w": "W", "ʍ": "W", "j": "Y",
    "i": "IY", "ɪ": "IH", "ᵻ": "IH", "e": "EH", "ɛ": "EH", "æ": "AE", "a": "AA", "ɑ": "AA",
    "ʌ": "AH", "ɐ": "AH", "ɔ": "AO", "ɒ": "AO", "o": "OW", "ʊ": "UH", "u": "UW",
    "ɚ": "ER", "ɜ": "ER", "ə": "AX",
}
AFFRICATES = {"tʃ": "SH", "dʒ": "SH"}

ARPABET: dict[str, tuple[str, ...]] = {
    "aa": ("AA",), "ae": ("AE",), "ah": ("AH",), "ao": ("AO",), "aw": ("AA", "UW"), "ax": ("AX",),
    "ay": ("AA", "IY"), "eh": ("EH",), "er": ("ER",), "ey": ("EH", "IY"), "ih": ("IH",), "iy": ("IY",),
    "ow": ("OW", "UW"), "oy": ("AO", "IY"), "uh": ("UH",), "uw": ("UW",),
    "b": ("BMP",), "p": ("BMP",), "m": ("BMP",), "f": ("FV",), "v": ("FV",), "th": ("TH",), "dh": ("TH",),
    "t": ("ALV",), "d": ("ALV",), "n": ("ALV",), "l": ("ALV",), "dx": ("ALV",), "s": ("S",), "z": ("S",),
    "sh": ("SH",), "zh": ("SH",), "ch": ("SH",), "jh": ("SH",), "k": ("K",), "g": ("K",), "ng": ("K",),
    "hh": ("H",), "r": ("R",), "w": ("W",), "y": ("Y",),
}


@dataclass(frozen=True)
class Segment:
    viseme: str
    start: float  # seconds
    end: float


def from_ipa(phoneme: str, start: float, end: float) -> list[Segment]:
    """One synthesiser phoneme (maybe a diphthong or affricate) -> viseme segments.

    Word gaps, pauses and punctuation become silence.
    """
    text = "".join(c for c in phoneme if c in IPA)
    if text in AFFRICATES:
        return [Segment(AFFRICATES[text], start, end)]
    names = [IPA[c] for c in text]
    return _split(names, start, end) if names else [Segment("sil", start, end)]


def from_arpabet(phone: str, start: float, end: float) -> list[Segment]:
    names = ARPABET.get(phone.lower().rstrip("012"))
    return _split(list(names), start, end) if names else [Segment("sil", start, end)]


def _split(names: list[str], start: float, end: float) -> list[Segment]:
    step = (end - start) / len(names)
    return [Segment(n, start + i * step, start + (i + 1) * step) for i, n in enumerate(names)]


def merge(segments: list[Segment]) -> list[Segment]:
    """Drops empty segments and joins neighbouring silences."""
    out: list[Segment] = []
    for s in segments:
        if s.end <= s.start:
            continue
        if out and s.viseme == "sil" and out[-1].viseme == "sil":
            out[-1] = Segment("sil", out[-1].start, s.end)
        else:
            out.append(s)
    return out


DECAY_S = 0.035  # dominance falls by e every 35 ms outside a segment
STEP_S = 0.005


def mouth_curves(segments: list[Segment], frames: int) -> np.ndarray:
    """(frames, DIM) motion with the mouth coefficients filled; other slots are zero."""
    grid = (np.arange(frames) + 0.5) / FPS  # frame centres
    targets = np.array([VISEMES[s.viseme][0] for s in segments], np.float32)
    weight = np.zeros((len(segments), frames), np.float32)
    for i, s in enumerate(segments):
        distance = np.maximum(0, np.maximum(s.start - grid, grid - s.end))
        weight[i] = VISEMES[s.viseme][1] * np.exp(-distance / DECAY_S)
    weight += 1e-6
    mouth = (weight.T @ targets) / weight.sum(0)[:, None]
    for s in segments:  # p/b/m: the lips meet, whatever the blend says
        if s.viseme == "BMP":
            centre = int(np.clip((s.start + s.end) / 2 * FPS, 0, frames - 1))
            shut = np.union1d(np.flatnonzero((grid >= s.start) & (grid <= s.end)), [centre])
            mouth[shut, 0] = 0.0
            mouth[shut, 4] = np.minimum(mouth[shut, 4], 0.0)
    out = motion.zeros(frames)
    out[:, motion.MOUTH_INDEX] = mouth
    return out


def frames_of(segment: Segment, frames: int, slack: float = 0.02) -> np.ndarray:
    """Frames whose centre falls within the segment (`slack` seconds either side), at
    least the nearest one."""
    centres = (np.arange(frames) + 0.5) / FPS
    hit = np.flatnonzero((centres >= segment.start - slack) & (centres <= segment.end + slack))
    nearest = min(frames - 1, int((segment.start + segment.end) / 2 * FPS))
    return hit if len(hit) else np.array([nearest])
