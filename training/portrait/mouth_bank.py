"""Real inner mouths for the portrait renderer, taken from real footage of a real person.

    python -m training.portrait.mouth_bank --out engine/weights/mouth_bank.npz

The portrait renderer paints what shows between parted lips from these: a ladder of real
open mouths, one per opening (inner-lip gap at the centre over the mouth width), each
unwrapped between its own inner lips onto a (depth x across) grid, so it can be laid
between any portrait's lips at any opening. The frames come from GRID speaker s1 (CC BY 4.0;
the speaker the motion model already learned from, so no held-out speaker's face is used):
the first --clips clips in name order; in each opening bin the sharpest frame whose mouth is
level and symmetric. (The frame nearest each bin's mean picture was tried: blurred, olive
teeth.) Colours are relit to each portrait when it loads (MouthBank.load). Nothing random:
the same clips give the same bank.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.mouth_interior import BANK, BANK_SHAPE, face_colours, opening_of, unwrap
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER
from engine.families.video.tracking import track_landmarks
from training.motion.real_faces import REAL_TALKING, read_clip

# Openings (inner gap at the centre over the mouth width) the ladder holds.
OPENINGS = (0.05, 0.08, 0.11, 0.14, 0.17, 0.2, 0.24)
BIN = 0.015  # a frame counts for a rung this close to it


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


def best_frames(paths: list[Path], log=print) -> dict[int, dict]:
    """Per rung, the sharpest level, symmetric frame (the first of equals); its colours are
    measured only when it takes the lead."""
    best: dict[int, dict] = {}
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
            score = sharpness(grid) * (1 - 5 * asym)
            if rung not in best or score > best[rung]["score"]:
                best[rung] = {"opening": opening, "grid": grid, "score": score, "colours": face_colours(rgb, lm),
                              "source": f"grid-s1/{path.stem}.mp4#{i}"}
        if n % 20 == 0:
            log(f"{n + 1}/{len(paths)} clips, {len(best)} openings found")
    return best


def build(clips: int, log=print) -> dict:
    paths = sorted((REAL_TALKING / "grid-s1").glob("*.mp4"))[:clips]
    best = best_frames(paths, log)
    if len(best) < 2:
        raise SystemExit(f"only {len(best)} openings found in {clips} clips")
    picks = [best[rung] for rung in sorted(best)]  # the sharpest: teeth and their gaps survive upscaling
    return {
        "openings": np.array([p["opening"] for p in picks], np.float32),
        "grids": np.stack([p["grid"] for p in picks]).astype(np.uint8),
        "skin": np.stack([p["colours"][1] for p in picks]).astype(np.float32),
        "bright": np.array([p["colours"][2] for p in picks], np.float32),
        "sources": np.array([p["source"] for p in picks]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BANK)
    parser.add_argument("--clips", type=int, default=120, help="GRID s1 clips to look through, in name order")
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
