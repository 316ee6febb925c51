"""Does the mouth follow the sound? Measured on what a client received, or on a rendered file.

The judge's measure of an agent's pushed speech: mediapipe face mesh on the video (opening =
inner-lip distance 13-14 over the eye distance 33-263, frames scaled to 256 px wide), the
audio's level in dB, both on one grid of CELL_S cells by their time (when a client plays
them, pts in a file), correlated at every lag within +-MAX_LAG_MS.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

CELL_S = 0.02  # half a frame: the measure steps its lag finer than the frames, so an offset between
# them (a client's audio buffer) costs no correlation to rounding
MAX_LAG_MS = 480
WIDTH = 256
RATE = 48000
FLOOR_DB = -60.0  # silence reads this, not minus infinity


@dataclass(frozen=True)
class Sync:
    corr: float  # at lag 0
    best: float  # at the best lag
    lag_ms: int  # > 0: the mouth moves after the sound

    def __str__(self) -> str:
        return f"corr {self.corr:.3f}, best {self.best:.3f} at {self.lag_ms:+d} ms"


def opening(frames: list[np.ndarray]) -> np.ndarray:
    """Inner-lip opening over the eye distance per RGB frame (NaN where no face is found), on
    frames scaled as the lip-sync judge scales them (training/motion/judge.py)."""
    from engine.families.video.tracking import track_landmarks

    scaled = [cv2.resize(f, (WIDTH, round(f.shape[0] * WIDTH / f.shape[1])), interpolation=cv2.INTER_AREA)
              for f in frames]
    lm = track_landmarks(scaled)
    return np.linalg.norm(lm[:, 14] - lm[:, 13], axis=-1) / np.linalg.norm(lm[:, 263] - lm[:, 33], axis=-1)


def mouth_follows_sound(times: np.ndarray, mouth: np.ndarray, audio: list[tuple[float, np.ndarray]],
                        start: float, end: float) -> Sync:
    """`times`, `mouth`: when each frame is shown and its opening; `audio`: (time of its first
    sample, 48 kHz mono PCM16 block). On a grid of CELL_S from `start` to `end`: the opening
    of the frame on screen at each cell's middle against the level of the sound in that cell."""
    count = int((end - start) / CELL_S)
    on_screen = np.searchsorted(times, start + (np.arange(count) + 0.5) * CELL_S, side="right") - 1
    mouth_cells = np.where(on_screen >= 0, mouth[np.clip(on_screen, 0, None)], np.nan)
    return correlate(mouth_cells, _level(audio, start, count))


def same_motion(ours: np.ndarray, reference: np.ndarray, max_offset: int = 50) -> float:
    """How alike two mouths are, frame by frame: the correlation of `reference`'s openings
    with `ours` at the offset (0 to max_offset frames into ours) where they agree best."""
    n = len(reference)

    def at(k: int) -> float:
        a, b = ours[k : k + n], reference[: len(ours) - k]
        ok = np.isfinite(a) & np.isfinite(b)
        return float(np.corrcoef(a[ok], b[ok])[0, 1]) if ok.sum() > 10 else 0.0

    return max(at(k) for k in range(min(max_offset, len(ours) - 10)))


def _level(audio: list[tuple[float, np.ndarray]], start: float, count: int) -> np.ndarray:
    """dB of the mean power of the samples that fall in each cell."""
    power, n = np.zeros(count), np.zeros(count)
    for t, pcm in audio:
        cell = np.floor((t + np.arange(len(pcm)) / RATE - start) / CELL_S).astype(int)
        keep = (cell >= 0) & (cell < count)
        power += np.bincount(cell[keep], pcm[keep].astype(np.float64) ** 2, count)
        n += np.bincount(cell[keep], minlength=count)
    floor = 32768.0**2 * 10 ** (FLOOR_DB / 10)
    return np.where(n > 0, 10 * np.log10(np.maximum(power / np.maximum(n, 1), floor)), np.nan)


def correlate(mouth: np.ndarray, level: np.ndarray) -> Sync:
    cell_ms = round(CELL_S * 1000)
    lags = range(-MAX_LAG_MS // cell_ms, MAX_LAG_MS // cell_ms + 1)
    corr = {lag: _lagged(mouth, level, lag) for lag in lags}
    best = max(corr, key=corr.__getitem__)
    return Sync(corr[0], corr[best], best * cell_ms)


def _lagged(mouth: np.ndarray, level: np.ndarray, lag: int) -> float:
    """Correlation of mouth[t + lag] with level[t]."""
    a, b = (mouth[lag:], level[: len(level) - lag]) if lag >= 0 else (mouth[:lag], level[-lag:])
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[ok], b[ok])[0, 1]) if ok.sum() > 10 and a[ok].std() > 0 else 0.0


def played_at(arrivals: list[float], media: list[float]) -> np.ndarray:
    """When a player with a jitter buffer shows each frame: at its media time (RTP timestamp),
    on the arrival clock by the median lead of arrival over media time. Arrival times alone
    jitter by a cell's width in a busy test process, and would smear the measure."""
    steps = np.diff(np.asarray(media, np.float64))
    usual = float(np.median(steps))
    steps = np.where((steps < 0) | (steps > 100 * usual), usual, steps)  # an RTP timestamp that wrapped
    t = np.concatenate([[0.0], np.cumsum(steps)])
    return t + float(np.median(np.asarray(arrivals) - t))


def file_sync(path: str) -> tuple[Sync, np.ndarray]:
    """The same measure on a rendered file (48 kHz sound), by each frame's and each audio
    block's pts; and the file's mouth, frame by frame."""
    import av

    video, audio = [], []
    with av.open(path) as container:  # one pass over the file, both streams in turn
        for f in container.decode(video=0, audio=0):
            if isinstance(f, av.VideoFrame):
                video.append((float(f.time or 0.0), f.to_ndarray(format="rgb24")))
            elif isinstance(f, av.AudioFrame):
                pcm = f.to_ndarray().reshape(-1)
                pcm = np.clip(pcm * 32767, -32768, 32767).astype(np.int16) if pcm.dtype.kind == "f" else pcm
                audio.append((float(f.time or 0.0), pcm))
    times, mouth = np.array([t for t, _ in video]), opening([f for _, f in video])
    return mouth_follows_sound(times, mouth, audio, 0.0, times[-1] + CELL_S), mouth
