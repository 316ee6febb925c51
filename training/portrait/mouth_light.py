"""How the open mouth is lit: our portraits beside the real held-out people.

    python -m training.portrait.mouth_light [--cache .cache/judge]

Per frame, on frames scaled as the judge scales them, with mediapipe's landmarks:
- bright: the brightest tenth of the pixels between the inner lips (the 90th percentile of
  luma: teeth where they show) over that of the face's skin (mouth_interior.skin_patches:
  cheeks, nose, forehead, chin);
- middle: the middle of the mouth (its rows 30-70 % from the upper lip to the lower, columns
  25-75 % across; the median luma) over its own brightest tenth: teeth read near 1, a cavity
  between the rows of teeth lower.
Medians by opening (inner-lip gap over the eye distance, as the judge measures it), for each
held-out speaker (the judge's cached landmarks; run the judge once first) and for the default
and the closed-lip portrait saying the contact sheet's sentence (or --audio, a recording: the
same track every run), their frames through I420 as a viewer gets them. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.avatar import DEFAULT_AVATAR
from engine.families.portrait.mouth_interior import LUMA, between_lips, skin_patches, unwrap
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER
from engine.families.video.tracking import track_landmarks
from training.motion import judge
from training.motion.real_faces import read_clip

OPENINGS = ((0.06, 0.10), (0.10, 0.14), (0.14, 0.20))  # eye distances


def brightness(rgb: np.ndarray, lm: np.ndarray) -> float:
    """The brightest tenth between the inner lips over the skin's (NaN when barely parted)."""
    inside = cv2.erode(between_lips(rgb.shape[:2], lm[UPPER_INNER], lm[LOWER_INNER]), np.ones((2, 2), np.uint8))
    if inside.sum() < 12:
        return float("nan")
    skin = skin_patches(inside.shape, lm)
    luma = rgb.astype(np.float32) @ LUMA
    return float(np.percentile(luma[inside > 0], 90) / np.percentile(luma[skin > 0], 90))


def middle(rgb: np.ndarray, lm: np.ndarray) -> float:
    """The middle of the mouth, unwrapped between its inner lips, over its brightest tenth."""
    luma = unwrap(rgb, lm[UPPER_INNER], lm[LOWER_INNER]).astype(np.float32) @ LUMA
    rows, cols = luma.shape
    centre = luma[int(0.3 * rows): int(0.7 * rows), int(0.25 * cols): int(0.75 * cols)]
    return float(np.median(centre) / max(np.percentile(luma, 90), 1.0))


def measured(frames: list[np.ndarray], lm: np.ndarray) -> dict[str, np.ndarray]:
    """Both measures per frame (NaN where no face was found)."""
    out = {}
    for name, measure in (("bright", brightness), ("middle", middle)):
        out[name] = np.array([measure(f, p) if np.isfinite(p).all() else np.nan for f, p in zip(frames, lm)])
    return out


def by_opening(opening: np.ndarray, values: np.ndarray) -> list[dict]:
    rows = []
    for lo, hi in OPENINGS:
        picked = values[(opening >= lo) & (opening < hi) & np.isfinite(values)]
        rows.append({"opening": [lo, hi], "frames": int(len(picked)),
                     "median": round(float(np.median(picked)), 3) if len(picked) else None})
    return rows


def summary(opening: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, list[dict]]:
    return {name: by_opening(opening, v) for name, v in values.items()}


def real_people(cache: Path) -> dict[str, dict]:
    """Per held-out speaker, all their clips' frames together (measured clip by clip)."""
    openings: dict[str, list[np.ndarray]] = {}
    values: dict[str, dict[str, list[np.ndarray]]] = {}
    for clip in judge.held_out():
        real = judge.real_measures(clip, cache)
        frames = [judge.scaled(f) for f in read_clip(clip.path)[0][: len(real["landmarks"])]]
        openings.setdefault(clip.speaker, []).append(real["opening"])
        for name, v in measured(frames, real["landmarks"]).items():
            values.setdefault(clip.speaker, {}).setdefault(name, []).append(v)
    return {s: summary(np.concatenate(openings[s]), {k: np.concatenate(v) for k, v in values[s].items()})
            for s in openings}


def ours(audio: Path | None = None) -> dict[str, dict]:
    """Both portraits saying `audio` (a recording), else the contact sheet's sentence (piper
    samples its own noise, so that track, and the bands with few frames, move between runs)."""
    from engine.batch.render import _text_audio, audio_stream
    from training.motion.evaluate import run_motion
    from training.motion.real_eval import CLOSED_MOUTH, SHEET_TEXT, MouthMeter

    blocks = audio_stream(audio)[0] if audio else _text_audio(SHEET_TEXT)[0]
    track = run_motion("dit", np.concatenate(list(blocks)))[0]
    out = {}
    for portrait in (DEFAULT_AVATAR, CLOSED_MOUTH):
        frames = [judge.scaled(cv2.cvtColor(cv2.cvtColor(f, cv2.COLOR_RGB2YUV_I420), cv2.COLOR_YUV2RGB_I420))
                  for f in MouthMeter(portrait).frames(track)]
        lm = track_landmarks(frames)  # already at the judge's scale
        out[portrait.stem] = summary(judge.mouth_measures(lm)["opening"], measured(frames, lm))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".cache/judge"), help="the judge's cache")
    parser.add_argument("--audio", type=Path, default=None, help="our portraits say this recording")
    args = parser.parse_args()
    print(json.dumps({"real": real_people(args.cache), "ours": ours(args.audio)}, indent=1))


if __name__ == "__main__":
    main()
