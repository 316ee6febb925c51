"""Real inner mouths for the portrait renderer, taken from real footage of a real person.

    python -m training.portrait.mouth_bank --out engine/weights/mouth_bank.npz

The portrait renderer paints what shows between parted lips from these: a ladder of real
open mouths, one per opening (inner-lip gap at the centre over the mouth width), each
unwrapped between its own inner lips onto a (depth x across) grid, so it can be laid
between any portrait's lips at any opening. The frames come from GRID speaker s1 (CC BY 4.0;
the speaker the motion model already learned from, so no held-out speaker's face is used):
all his clips (or the first --clips in name order); in each opening bin the sharpest frame
whose mouth is level and symmetric and whose light is his usual studio light (a few sessions
are lit orange). From PARTED_FROM up, the sharpest of those that show his rows of teeth apart:
he mostly speaks with his teeth together, where most people show a dark cavity between them
at a wide opening (docs/motion.md, "Real inner mouths"). (The frame nearest each bin's mean
picture was tried: blurred, olive teeth.) Colours are relit to each portrait when it loads
(MouthBank.load). Nothing random: the same clips give the same bank.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.mouth_interior import BANK, BANK_SHAPE, LUMA, chroma, face_colours, opening_of, unwrap
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER
from engine.families.video.tracking import track_landmarks
from training.motion.real_faces import REAL_TALKING, read_clip

# Openings (inner gap at the centre over the mouth width) the ladder holds.
OPENINGS = (0.05, 0.08, 0.11, 0.14, 0.17, 0.2, 0.24)
BIN = 0.015  # a frame counts for a rung this close to it
PARTED_FROM = 0.11  # from this rung up, a frame whose rows of teeth are apart is preferred:
PARTED = 0.25  # this share of its middle is cavity (`parted`): about s1's top tenth at 0.2,
# 1.4 % of his frames at 0.11
TINT = 0.1  # usual light: the skin's colour over luma this close to the median frame's in every channel
# (his frames lie within 0.08 of it; the orange sessions, a twentieth of them, 0.2-0.3 away)


def measures(lm: np.ndarray) -> tuple[float, float, float]:
    """Opening, tilt of the inner corners (share of the mouth width) and left/right asymmetry."""
    width = float(np.linalg.norm(lm[291] - lm[61]))
    opening = opening_of(lm[UPPER_INNER], lm[LOWER_INNER], width)
    a, b = lm[UPPER_INNER[0]], lm[UPPER_INNER[-1]]
    tilt = abs(float(b[1] - a[1])) / width
    centre = (lm[13] + lm[14]) / 2
    asym = abs(float(np.linalg.norm(centre - a) - np.linalg.norm(centre - b))) / width
    return opening, tilt, asym


def sharpness(grid: np.ndarray) -> float:
    grey = cv2.cvtColor(grid, cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(cv2.Laplacian(grey, cv2.CV_32F).var())


@dataclass
class Candidate:
    """A level, symmetric frame near one rung's opening, unwrapped between its inner lips."""

    rung: int
    opening: float
    grid: np.ndarray
    score: float  # sharpness, less for an asymmetric mouth
    colours: tuple[np.ndarray, np.ndarray, float]
    source: str


def parted(grid: np.ndarray) -> float:
    """How far apart the rows of teeth are: the share of the mouth's middle (rows 15-90 % of
    the way from the upper lip, columns 25-75 %) darker than half its brightest tenth."""
    luma = grid.astype(np.float32) @ LUMA
    rows, cols = luma.shape
    middle = luma[int(0.15 * rows): int(0.9 * rows), int(0.25 * cols): int(0.75 * cols)]
    return float((middle < 0.5 * np.percentile(luma, 90)).mean())


def candidates(paths: list[Path], log=print) -> list[Candidate]:
    out = []
    for n, path in enumerate(paths):
        frames, _ = read_clip(path)
        for i, (rgb, lm) in enumerate(zip(frames, track_landmarks(frames))):
            if not np.isfinite(lm).all():
                continue
            opening, tilt, asym = measures(lm)
            rung = min(range(len(OPENINGS)), key=lambda k: abs(OPENINGS[k] - opening))
            if abs(OPENINGS[rung] - opening) > BIN or tilt > 0.06 or asym > 0.06:
                continue
            grid = unwrap(rgb, lm[UPPER_INNER], lm[LOWER_INNER])
            out.append(Candidate(rung, opening, grid, sharpness(grid) * (1 - 5 * asym), face_colours(rgb, lm),
                                 f"grid-s1/{path.stem}.mp4#{i}"))
        if n % 20 == 0:
            log(f"{n + 1}/{len(paths)} clips, {len(out)} frames near an opening")
    return out


def pick(found: list[Candidate]) -> list[Candidate]:
    """Per rung, the sharpest frame (the first of equals) under the speaker's usual light; from
    PARTED_FROM up, the sharpest of those whose teeth are apart, where there are any."""
    if not found:
        return []
    skin = chroma(np.stack([c.colours[1] for c in found]))
    usual = np.abs(skin - np.median(skin, 0)).max(1) <= TINT
    picks = []
    for rung, opening in enumerate(OPENINGS):
        mine = [c for c, ok in zip(found, usual) if ok and c.rung == rung] or [c for c in found if c.rung == rung]
        if opening >= PARTED_FROM:
            mine = [c for c in mine if parted(c.grid) >= PARTED] or mine
        if mine:
            picks.append(max(mine, key=lambda c: c.score))
    return picks


def build(clips: int | None, log=print) -> dict:
    paths = sorted((REAL_TALKING / "grid-s1").glob("*.mp4"))[:clips]
    picks = pick(candidates(paths, log))
    if len(picks) < 2:
        raise SystemExit(f"only {len(picks)} openings found in {len(paths)} clips")
    return {
        "openings": np.array([p.opening for p in picks], np.float32),
        "grids": np.stack([p.grid for p in picks]).astype(np.uint8),
        "skin": np.stack([p.colours[1] for p in picks]).astype(np.float32),
        "bright": np.array([p.colours[2] for p in picks], np.float32),
        "sources": np.array([p.source for p in picks]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BANK)
    parser.add_argument("--clips", type=int, default=None, help="only the first GRID s1 clips, in name order")
    parser.add_argument("--strip", type=Path, default=None, help="also write the ladder as a PNG here")
    args = parser.parse_args()
    bank = build(args.clips)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **bank)
    if args.strip:
        size = (BANK_SHAPE[1] * 2, BANK_SHAPE[0] * 2)
        big = [cv2.resize(g, size, interpolation=cv2.INTER_CUBIC) for g in bank["grids"]]
        cv2.imwrite(str(args.strip), cv2.cvtColor(np.vstack(big), cv2.COLOR_RGB2BGR))
    print(json.dumps({"out": str(args.out), "openings": bank["openings"].round(3).tolist(),
                      "sources": bank["sources"].tolist()}))


if __name__ == "__main__":
    main()
