"""Fit the lip-shape detector on force-aligned phones; writes engine/weights/lip_shape.safetensors.

    python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data-speed --speeds 2
    python -m training.motion.lip_shape --data .cache/real-data-speed --seed 0      # make shape-data train-shape

Labels: +1 inside each rounded sound (o, u, w), -1 inside each spread one (ee, i, e), 0
elsewhere, from GRID s1's sentences force-aligned by pocketsphinx (real_data.py stores
them beside the features of the clean clip and its degraded and re-timed copies). A ridge
regression from the encoder's rows around each frame (the rows MotionStage holds) onto the
label, solved in closed form over `frames` sampled frames (deterministic for a seed; a
minute). The last twentieth of each set's sequences is held back and the log gives the AUC
of rounded against spread frames there; the features and the ridge were chosen on the
validation speakers (docs/motion.md, "Shape").
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine.core.module import config_metadata
from engine.families.motion.lip_shape import WEIGHTS, LipShape, LipShapeConfig


@dataclass(frozen=True)
class ShapeFitConfig:
    seed: int = 0
    frames: int = 120_000
    """Frames sampled from the sets together."""
    shares: tuple[float, ...] = (1.0,)
    """Share of the sampled frames from each --data set, in order."""
    ridge: float = 0.01
    """Ridge strength per sampled frame (on standardised columns)."""
    held_back: float = 0.05


def labels(data: dict) -> np.ndarray:
    """(frames,) +1 / -1 / 0 per frame of a real-faces set (real_data.py stores them)."""
    if "rounding" not in data:
        raise SystemExit("this data has no rounding labels: build it with python -m training.motion.real_data")
    return data["rounding"].astype(np.float32)


def centres(data: dict, c: LipShapeConfig, held_back: float) -> tuple[np.ndarray, np.ndarray]:
    """Frames whose rows lie inside their own sequence: the fitted ones and the held-back ones."""
    spans = list(zip(data["starts"][:-1], data["starts"][1:]))
    cut = int(len(spans) * (1 - held_back))
    inside = lambda part: np.concatenate([np.arange(a + c.context, b - c.lookahead) for a, b in part  # noqa: E731
                                          if b - a > c.rows])
    return inside(spans[:cut]), inside(spans[cut:])


def windows(data: dict, at: np.ndarray, c: LipShapeConfig) -> np.ndarray:
    """(N, rows, feature columns) the rows around each frame, as MotionStage hands them over."""
    return data["features"][at[:, None] + np.arange(-c.context, c.lookahead + 1)]


def rows(data: dict, at: np.ndarray, c: LipShapeConfig) -> np.ndarray:
    """(N, rows * columns) the encoder's rows around each frame, side by side."""
    window = windows(data, at, c)[..., c.first_column: c.first_column + c.columns]
    return window.astype(np.float32).reshape(len(at), -1)


def fit(sets: list[dict], config: ShapeFitConfig, c: LipShapeConfig = LipShapeConfig()) -> LipShape:
    rng = np.random.default_rng(config.seed)
    shares = np.asarray(config.shares[: len(sets)], np.float64)
    picked = []
    for data, share in zip(sets, shares / shares.sum()):
        train, _ = centres(data, c, config.held_back)
        size = min(int(share * config.frames), len(train))
        picked.append((data, np.sort(rng.choice(train, size=size, replace=False))))
    sample = np.concatenate([rows(d, at[:: max(len(at) // 5000, 1)], c) for d, at in picked])
    mean, std = sample.mean(0), np.maximum(sample.std(0), 1e-3)
    gram = np.zeros((len(mean) + 1, len(mean) + 1))
    moment = np.zeros(len(mean) + 1)
    for data, at in picked:  # normal equations, a block of frames at a time: memory stays small
        y = labels(data)
        for block in np.array_split(at, max(len(at) // 4000, 1)):
            z = np.concatenate([(rows(data, block, c) - mean) / std, np.ones((len(block), 1), np.float32)], 1)
            gram += z.T.astype(np.float64) @ z
            moment += z.T.astype(np.float64) @ y[block]
    penalty = config.ridge * gram[-1, -1] * np.eye(len(gram))
    penalty[-1, -1] = 0  # the bias is not shrunk
    solved = np.linalg.solve(gram + penalty, moment)
    params = {"mean": mean, "std": std, "weight": solved[:-1], "bias": solved[-1:]}
    return LipShape.from_params({k: v.astype(np.float32) for k, v in params.items()}, c)


def auc(score: np.ndarray, label: np.ndarray) -> float:
    """How often a rounded frame scores above a spread one (0.5: no better than chance)."""
    rounded, spread = np.sort(score[label > 0]), score[label < 0]
    if not len(rounded) or not len(spread):
        return float("nan")
    return float(1 - np.searchsorted(rounded, spread, side="right").mean() / len(rounded))


def held_back_auc(model: LipShape, sets: list[dict], held_back: float) -> list[float]:
    out = []
    for data in sets:
        at = centres(data, model.config, held_back)[1]
        out.append(round(auc(model.rounding(windows(data, at, model.config)), labels(data)[at]), 3))
    return out


def save(model: LipShape, out: Path, config: ShapeFitConfig) -> None:
    from safetensors.numpy import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = config_metadata(model.config)
    metadata["training"] = json.dumps({**asdict(config), "command": "python -m training.motion.lip_shape"})
    partial = out.with_name(out.name + ".part")
    save_file({k: np.ascontiguousarray(v) for k, v in model.params.items()}, str(partial), metadata=metadata)
    partial.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[Path(".cache/real-data-speed")])
    parser.add_argument("--shares", type=float, nargs="+", default=list(ShapeFitConfig.shares))
    parser.add_argument("--frames", type=int, default=ShapeFitConfig.frames)
    parser.add_argument("--ridge", type=float, default=ShapeFitConfig.ridge)
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = ShapeFitConfig(seed=args.seed, frames=args.frames, shares=tuple(args.shares), ridge=args.ridge)
    sets = [dict(np.load(d / "train.npz")) for d in args.data]
    model = fit(sets, config)
    save(model, args.out, config)
    print(json.dumps({"held_back_auc": held_back_auc(model, sets, config.held_back), "out": str(args.out)}))


if __name__ == "__main__":
    main()
