"""Real (audio, motion) pairs: the rig fitted to real faces, beside the voice that moved them.

    python -m training.motion.real_faces --out .cache/real-faces      # landmarks, once (2 min)
    python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data

Training sources (TRAIN) give train.npz: each clip clean plus `copies` versions through a
random recording channel (channel.degrade: sample rate, telephone band, MP3/Opus,
level, noise, reverb). Every other source is held out whole, never split into windows
of a trained speaker: heldout.npz keeps their clean audio, fitted motion and the real
mouth opening for the evaluation. Breathing is not visible in the clips; it comes from
the procedural idle generator, seeded per clip, so the model keeps breathing. With
`--shut-bilabials` the training clips' jaw is also shut inside every force-aligned p/b/m
(an experiment: the committed weights were trained without it; see docs/motion.md).

Published video is not always in sync: each source's audio/video offset is measured
(the lag, within +-MAX_OFFSET frames, at which the real mouth opening best follows the
sound's level, median over the source's clips) and the audio moved by it, as lip-sync
corpora do with SyncNet. GRID and CREMA-D measure 0; the White House address 2 frames
(its picture leads its sound by 80 ms).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.core import motion
from engine.families.motion.emphasis import frame_db
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.mel_features import MelFeatureModule
from engine.families.motion.speech_features import SpeechFeatureModule, stream_rows
from engine.families.portrait.rig_fit import fit_clip, mouth_opening, smooth

from .channel import degrade
from .evaluate import align
from .real_faces import load
from .transcripts import known_transcript
from .visemes import frames_of, rounding_sign

TRAIN = ("grid-s1",)
MAX_OFFSET = 4
MIN_TRACKED = 0.9  # share of frames with a face for a clip to be used


SPEECH = SpeechFeatureModule()


def features(pcm: np.ndarray, frames: int, warp: float = 1.0) -> np.ndarray:
    """The engine's own speech feature rows for one clip, from a fresh stream state; with
    `warp`, the log-mel columns as if the speaker's vocal tract were that much shorter (vocal tract length
    perturbation: the filterbank reads frequency f where it would read f * warp)."""
    return stream_rows(SPEECH if warp == 1.0 else SpeechFeatureModule(warped_mel(warp)), pcm, frames)


def warped_mel(warp: float) -> MelFeatureModule:
    module = MelFeatureModule()
    bins = np.arange(module._filters.shape[1], dtype=np.float32)
    module._filters = np.stack([np.interp(bins * warp, bins, row, right=0.0)
                                for row in module._filters]).astype(np.float32)
    return module


def targets(landmarks: np.ndarray, seed: int) -> np.ndarray:
    track = fit_clip(landmarks)
    breath = motion.zeros(len(track))
    idle = IdleMotionModule()
    idle(breath, np.zeros(len(track)), idle.initial_state(seed))
    track[:, motion.INDEX["breath"]] = breath[:, motion.INDEX["breath"]]
    return track


def phone_labels(pcm: np.ndarray, text: str | None, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """From the force-aligned phones of the sentence the clip's name spells, (frames,) each:
    uint8 1 inside each p/b/m, and int8 +1 inside each rounded sound (o, u, w), -1 inside
    each spread one (ee, i, e).

    The labels of the lip-closure detector (training/motion/closure.py) and of the lip-shape
    detector (training/motion/lip_shape.py); with
    --shut-bilabials also where the fitted jaw is set shut: lips touch in every p, b and
    m, but the tracker sees a gap of a few pixels in some (the fit then leaves the jaw at
    0.05-0.15, where a trained mouth learns to stay parted).
    """
    label, rounding = np.zeros(frames, np.uint8), np.zeros(frames, np.int8)
    for s in align(pcm, text) if text else []:
        inside = frames_of(s, frames, slack=0.0)
        if s.viseme == "BMP":
            label[inside] = 1
        rounding[inside] = rounding_sign(s.viseme)
    return label, rounding


def lagged_corr(a: np.ndarray, b: np.ndarray, lag: int) -> float:
    """Correlation of a[t] with b[t + lag] over the frames where both are measured (not NaN);
    0 where fewer than 10 are, or either side does not move."""
    x, y = (a[: len(a) - lag], b[lag:]) if lag >= 0 else (a[-lag:], b[: len(b) + lag])
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 10 or np.std(x[ok]) < 1e-6 or np.std(y[ok]) < 1e-6:
        return 0.0
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def level(pcm: np.ndarray, frames: int) -> np.ndarray:
    """Each frame's smoothed sound level in dBFS (floored at -60): what a mouth that only
    follows loudness would do."""
    return smooth(np.maximum(frame_db(pcm, frames), -60))


def av_offset(items: list[tuple[str, np.ndarray, np.ndarray]]) -> int:
    """Frames by which a source's sound lags its picture (median over its clips)."""
    best = []
    for _, landmarks, pcm in items:
        if not usable(landmarks):
            continue
        opening = mouth_opening(np.nan_to_num(landmarks))
        corr = [lagged_corr(opening, level(pcm, len(opening)), lag) for lag in range(-MAX_OFFSET, MAX_OFFSET + 1)]
        best.append(int(np.nanargmax(corr)) - MAX_OFFSET)
    return int(np.median(best)) if best else 0


def shifted(pcm: np.ndarray, frames: int) -> np.ndarray:
    """The audio `frames` frames earlier (a late sound track brought into sync; negative:
    later), same length."""
    n = abs(frames) * SAMPLES_PER_FRAME
    if frames >= 0:
        return np.concatenate([pcm[n:], np.zeros(n, pcm.dtype)])
    return np.concatenate([np.zeros(n, pcm.dtype), pcm[:-n]])


def usable(landmarks: np.ndarray) -> bool:
    return len(landmarks) >= 20 and np.isfinite(landmarks[:, 0, 0]).mean() >= MIN_TRACKED


VTLP = (0.85, 1.18)  # vocal tract warps of the --vtlp copies: other speakers than GRID's one
SPEEDS = (0.8, 1.25)  # playback rates of the --speeds copies: faster, slower, higher and lower voices


def played_at(rate: float, pcm: np.ndarray, track: np.ndarray, *labels: np.ndarray) -> tuple[np.ndarray, ...]:
    """The clip played `rate` times as fast, as a tape would: speech faster or slower and the
    voice's pitch and formants (its vocal tract length) scaled with it, the motion on the new
    timeline. GRID's one speaker talks slowly in a steady voice; people in the wild do neither."""
    from fractions import Fraction

    from scipy.signal import resample_poly

    step = Fraction(rate).limit_denominator(40)
    frames = int(len(track) / rate)
    sound = resample_poly(pcm.astype(np.float64), step.denominator, step.numerator)
    sound = np.pad(sound, (0, max(frames * SAMPLES_PER_FRAME - len(sound), 0)))[: frames * SAMPLES_PER_FRAME]
    at = np.minimum(np.arange(frames) * rate, len(track) - 1)
    moved = np.stack([np.interp(at, np.arange(len(track)), column) for column in track.T], 1).astype(np.float32)
    nearest = np.round(at).astype(int)
    return (np.clip(sound, -32768, 32767).astype(np.int16), moved, *(label[nearest] for label in labels))


def build(faces: Path, out: Path, copies: int = 3, seed: int = 0, shut: bool = False, vtlp: bool = False,
          speeds: int = 0, log=print) -> dict:
    rng = np.random.default_rng(seed)
    warps = np.random.default_rng(seed + 1)  # apart from rng: without --vtlp the data is the same as before
    rates = np.random.default_rng(seed + 2)  # so is it without --speeds
    clips = load(faces)
    train: dict[str, list] = {"features": [], "motion": [], "bilabial": [], "rounding": []}
    held: dict[str, list] = {"features": [], "motion": [], "pcm": [], "opening": [], "names": [], "sources": []}
    bilabials = 0
    offsets = {source: av_offset(items) for source, items in clips.items()}
    log(json.dumps({"av_offset_frames": offsets}))
    for source, items in clips.items():
        for i, (name, landmarks, pcm) in enumerate(items):
            pcm = shifted(pcm, offsets[source])
            if not usable(landmarks):
                log(json.dumps({"skipped": name, "reason": "face not tracked"}))
                continue
            frames = len(landmarks)
            track = targets(landmarks, seed * 100_003 + i)
            if source in TRAIN:
                label, rounding = phone_labels(pcm, known_transcript(name, source), frames)
                bilabials += int((np.diff(label, prepend=0) == 1).sum())
                if shut:
                    track[label == 1, motion.INDEX["jaw_open"]] = 0.0
                for k, version in enumerate([pcm] + [degrade(pcm, rng) for _ in range(copies)]):
                    warp = float(warps.uniform(*VTLP)) if vtlp and k > 0 else 1.0
                    train["features"].append(features(version, frames, warp))
                    train["motion"].append(track)
                    train["bilabial"].append(label)
                    train["rounding"].append(rounding)
                for _ in range(speeds):
                    sound, moved, *labels = played_at(float(rates.uniform(*SPEEDS)), pcm, track, label, rounding)
                    train["features"].append(features(degrade(sound, rates), len(moved)))
                    train["motion"].append(moved)
                    train["bilabial"].append(labels[0])
                    train["rounding"].append(labels[1])
            else:
                held["features"].append(features(pcm, frames))
                held["motion"].append(track)
                held["pcm"].append(pcm[: frames * SAMPLES_PER_FRAME])
                held["opening"].append(mouth_opening(np.nan_to_num(landmarks)))
                held["names"].append(name)
                held["sources"].append(source)
        log(json.dumps({"source": source, "clips": len(items)}))
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "train.npz", **_packed(train))
    np.savez(out / "heldout.npz", **_packed(held, with_audio=True))
    minutes = sum(len(f) for f in train["features"]) / 25 / 60
    return {"train_minutes": round(minutes, 1), "bilabials": bilabials, "bilabials_shut": shut, "vtlp": vtlp,
            "speeds": speeds,
            "heldout_clips": len(held["names"]),
            "av_offset_frames": offsets}


def _packed(parts: dict[str, list], with_audio: bool = False) -> dict[str, np.ndarray]:
    starts = np.cumsum([0] + [len(f) for f in parts["features"]])
    out = {"features": np.concatenate(parts["features"]).astype(np.float16),
           "motion": np.concatenate(parts["motion"]).astype(np.float32), "starts": starts}
    for labels in ("bilabial", "rounding"):
        if parts.get(labels):
            out[labels] = np.concatenate(parts[labels])
    if with_audio:
        out |= {"pcm": np.concatenate(parts["pcm"]), "pcm_starts": starts * SAMPLES_PER_FRAME,
                "opening": np.concatenate(parts["opening"]).astype(np.float32),
                "names": np.array(parts["names"]), "sources": np.array(parts["sources"])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=Path(".cache/real-faces"))
    parser.add_argument("--out", type=Path, default=Path(".cache/real-data"))
    parser.add_argument("--copies", type=int, default=3, help="degraded versions of each training clip")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shut-bilabials", action="store_true",
                        help="shut the fitted jaw inside force-aligned p/b/m of the training clips")
    parser.add_argument("--vtlp", action="store_true",
                        help="warp the degraded copies' vocal tract (an experiment; see docs/motion.md)")
    parser.add_argument("--speeds", type=int, default=0,
                        help=f"extra copies of each training clip played at a random rate in {SPEEDS} (and degraded)")
    args = parser.parse_args()
    print(json.dumps(build(args.faces, args.out, args.copies, args.seed, args.shut_bilabials, args.vtlp, args.speeds)))


if __name__ == "__main__":
    main()
