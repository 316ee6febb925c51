"""Which audio features tell a real mouth's opening for voices never trained on: a linear probe.

    python -m training.motion.probe --faces .cache/real-faces     # about 5 minutes

For each feature set, a ridge regression over 11 rows (8 before each frame, itself and 2
after, as the MotionDiT hears them) learns GRID s1's fitted jaw from its clean clips, all
but the last 50. Each held-out source's mean correlation with the real mouth opening is
printed (JSON), beside the loudness mouth's: the measurement behind the speech features
(engine/families/motion/speech_features.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from engine.core import motion
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.portrait.rig_fit import mouth_opening

from .real_data import av_offset, features, level, shifted, targets, usable
from .real_faces import load

CONTEXT = (-8, 2)
HELD_BACK = 50  # s1 clips tested, not trained on
COMPONENTS = 256
RIDGE = 10.0


def clip_rows(faces: Path) -> list[dict]:
    rows = []
    for source, items in load(faces).items():
        offset = av_offset(items)
        for i, (_, landmarks, pcm) in enumerate(items):
            if usable(landmarks):
                pcm = shifted(pcm, offset)
                rows.append({"source": source, "features": features(pcm, len(landmarks)),
                             "jaw": targets(landmarks, i)[:, motion.INDEX["jaw_open"]],
                             "opening": mouth_opening(np.nan_to_num(landmarks)),
                             "level": level(pcm, len(landmarks))})
    return rows


def windowed(x: np.ndarray) -> np.ndarray:
    index = np.clip(np.arange(len(x))[:, None] + np.arange(CONTEXT[0], CONTEXT[1] + 1)[None], 0, len(x) - 1)
    return x[index].reshape(len(x), -1)


def probe(train: list[dict], held: dict[str, list[dict]], columns: slice) -> dict[str, float]:
    """Mean correlation per held-out source of a ridge map from the rows' `columns`."""
    x = np.concatenate([windowed(r["features"][:, columns]) for r in train])
    y = np.concatenate([r["jaw"] for r in train])
    mean, std = x.mean(0), x.std(0) + 1e-3
    z = (x - mean) / std
    basis = np.linalg.svd(z[::7], full_matrices=False)[2][:COMPONENTS].T  # PCA: a well-posed solve
    z = z @ basis
    w = np.linalg.solve(z.T @ z + RIDGE * len(z) / 1000 * np.eye(z.shape[1]), z.T @ (y - y.mean()))
    predict = lambda r: ((windowed(r["features"][:, columns]) - mean) / std) @ basis @ w  # noqa: E731
    return {s: corr(rs, predict) for s, rs in held.items()}


def corr(rows: list[dict], track) -> float:
    return round(float(np.mean([np.corrcoef(track(r), r["opening"])[0, 1] for r in rows])), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=Path(".cache/real-faces"))
    args = parser.parse_args()
    rows = clip_rows(args.faces)
    s1 = [r for r in rows if r["source"] == "grid-s1"]
    held = {s: [r for r in rows if r["source"] == s] for s in dict.fromkeys(r["source"] for r in rows)}
    held["grid-s1"] = s1[-HELD_BACK:]
    train = s1[:-HELD_BACK]
    print(json.dumps({"log_mel": probe(train, held, slice(0, MEL_DIM)),
                      "whisper_encoder": probe(train, held, slice(MEL_DIM, None)),
                      "both": probe(train, held, slice(None)),
                      "loudness_mouth": {s: corr(rs, lambda r: r["level"]) for s, rs in held.items()}}))


if __name__ == "__main__":
    main()
