"""Train the MotionDiT with flow matching on real faces and synthetic voices; writes engine/weights.

    python -m training.motion.real_faces --out .cache/real-faces
    python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data
    python -m training.motion.recipe --out .cache/motion-data --scale 0.5 --seed 0
    python -m training.motion.train --data .cache/real-data .cache/motion-data --steps 20000 --lookahead 2 --seed 0

Three quarters of the examples come from the real clips (how real mouths move), a quarter
from the synthetic recipe (many voices, phoneme-exact closures).

Each example is one window of frames from one sequence, in one of three roles the
engine asks of the model: an N chunk (the first window - chunk frames are known), an
I chunk (all frames known but the one after the context) or a session start (an N
chunk whose context is a neutral face over digital silence). Known frames get a little
noise so the model tolerates its own imperfect boundary motion at run time. The loss
is the flow-matching velocity error on the unknown frames, mouth channels weighted up,
more so where the lips shut inside speech. Each token hears the audio `lookahead`
frames ahead of the frame it moves.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from engine.core import motion
from engine.core.module import config_metadata
from engine.families.motion.dit import WEIGHTS, MotionDiTConfig
from engine.families.motion.speech_features import silence

from .model import MotionDiT


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    batch: int = 128
    lr: float = 5e-4
    warmup: int = 200
    steps: int = 20_000
    minutes: float = 55.0
    """A safety limit only: the schedule follows the steps (about 13 minutes on 2 cores)."""
    mouth_weight: float = 3.0
    context_noise: float = 0.08
    threads: int = 2
    shares: tuple[float, ...] = (0.75, 0.25)
    """Share of examples drawn from each --data set, in order: real faces, then synthetic voices."""
    jaw_gains: tuple[float, ...] = (3.6, 2.2)
    """Jaw target scale per data set. GRID's s1, the one trained speaker, opens about half as
    wide as the twelve other speakers of the real clips (jaw std 0.10 against 0.16-0.27), and
    the viseme curves of the synthetic recipe less still; one default mouth should open like
    the typical speaker (and a regressed mouth moves less than its targets)."""
    jaw_dead_band: float = 0.03
    """Jaw targets below this are shut lips: the gain applies above it."""
    closure_weight: float = 3.0
    """Loss weight of the mouth in frames where the lips shut inside speech (p/b/m)."""


class Windows:
    """Random training windows over the frames of all sequences of several data sets.

    Each example first draws its data set by `shares` (real faces and synthetic voices
    in a set proportion, whatever their sizes), then a window inside one sequence.
    """

    def __init__(self, sets: list[dict], window: int, shares: list[float] | None = None, lookahead: int = 0):
        self.features = np.concatenate([d["features"] for d in sets]).astype(np.float32)
        self.motion = np.concatenate([d["motion"] for d in sets]).astype(np.float32)
        self.valid, offset = [], 0
        for d in sets:
            starts = d["starts"] + offset
            span = window + lookahead  # the last frame's features lie `lookahead` frames further on
            self.valid.append(np.concatenate([np.arange(a, b - span + 1) for a, b in zip(starts[:-1], starts[1:])
                                              if b - a >= span]))
            offset += len(d["features"])
        shares = np.asarray(shares or [1.0] * len(sets), np.float64)
        self.shares = shares / shares.sum()
        self.window, self.lookahead = window, lookahead

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        which = rng.choice(len(self.valid), size=size, p=self.shares)
        first = np.array([self.valid[w][rng.integers(len(self.valid[w]))] for w in which])
        index = first[:, None] + np.arange(self.window)
        return self.motion[index], self.features[index + self.lookahead]


def known_masks(rng: np.random.Generator, size: int, c: MotionDiTConfig) -> tuple[np.ndarray, np.ndarray]:
    """Known flags (size, W) for N, I and session-start examples, and which are session starts."""
    context = c.window - c.chunk
    kind = rng.random(size)
    known = np.zeros((size, c.window), bool)
    known[:, :context] = True
    interp = kind < 0.3
    known[interp] = True
    known[interp, context] = False
    return known, kind > 0.9


def train(data_dirs: list[Path], out: Path, config: TrainConfig,
          model_config: MotionDiTConfig = MotionDiTConfig(), log=print) -> dict:
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    sets = [dict(np.load(d / "train.npz")) for d in data_dirs]
    jaw = motion.INDEX["jaw_open"]
    for data, gain in zip(sets, config.jaw_gains):  # the dead band keeps shut lips shut (tracker jitter)
        data["motion"][:, jaw] = gain * np.maximum(data["motion"][:, jaw] - config.jaw_dead_band, 0)
    windows = Windows(sets, model_config.window, list(config.shares[: len(sets)]), model_config.lookahead)
    model = MotionDiT(model_config)
    stats = normalisation(windows)
    for name, value in stats.items():
        getattr(model, name).copy_(torch.from_numpy(value))
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    channel_weights = np.ones(model_config.motion_dim, np.float32)
    channel_weights[motion.MOUTH_INDEX] = config.mouth_weight
    started, step, recent = time.monotonic(), 0, []
    while step < config.steps and time.monotonic() - started < config.minutes * 60:
        # cosine decay over the steps, not the clock, so the same command gives the same weights
        lr = config.lr * min(1.0, (step + 1) / config.warmup) * 0.5 * (1 + np.cos(np.pi * step / config.steps))
        for group in optimiser.param_groups:
            group["lr"] = lr
        loss = train_step(model, optimiser, *example(windows, rng, config, model_config, stats, channel_weights))
        recent.append(loss)
        step += 1
        if step % 200 == 0 or step == config.steps:
            log(json.dumps({"step": step, "loss": round(float(np.mean(recent)), 4), "lr": round(lr, 6),
                            "minutes": round((time.monotonic() - started) / 60, 1)}))
            recent = []
        if step % 2000 == 0:
            save(model, out, config, step)
    save(model, out, config, step)
    if step < config.steps:
        warning = f"stopped by the {config.minutes} minute limit after {step} of {config.steps} steps"
        log(json.dumps({"warning": warning}))
    return {"steps": step, "minutes": (time.monotonic() - started) / 60}


def normalisation(windows: Windows) -> dict[str, np.ndarray]:
    return {"motion_mean": windows.motion.mean(0), "motion_std": np.maximum(windows.motion.std(0), 1e-2),
            "feature_mean": windows.features.mean(0), "feature_std": np.maximum(windows.features.std(0), 1e-2)}


def loss_weights(motion_: np.ndarray, channel_weights: np.ndarray, closure_weight: float) -> np.ndarray:
    """(B, W, M) weights: the channels' own, the mouth's raised where the lips shut inside speech."""
    jaw = motion_[..., motion.INDEX["jaw_open"]]
    shut = (jaw <= 0.05) & (jaw.max(1, keepdims=True) >= 0.25)
    weights = np.broadcast_to(channel_weights, motion_.shape).copy()
    weights[..., motion.MOUTH_INDEX] *= np.where(shut, closure_weight, 1.0)[..., None]
    return weights


def example(windows: Windows, rng: np.random.Generator, config: TrainConfig, c: MotionDiTConfig,
            stats: dict[str, np.ndarray], channel_weights: np.ndarray) -> tuple[torch.Tensor, ...]:
    motion_, features = windows.batch(rng, config.batch)
    weights = loss_weights(motion_, channel_weights, config.closure_weight)
    known, start = known_masks(rng, config.batch, c)
    context = c.window - c.chunk
    motion_[start, :context] = 0.0
    features[start, :context] = silence(c.audio_dim)
    x0 = (motion_ - stats["motion_mean"]) / stats["motion_std"]
    audio = (features - stats["feature_mean"]) / stats["feature_std"]
    x0_known = x0 + rng.standard_normal(x0.shape) * config.context_noise * rng.random((len(x0), 1, 1))
    noise = rng.standard_normal(x0.shape)
    sigma = 1 / (1 + np.exp(-rng.standard_normal(len(x0))))  # logit-normal, as in SD3
    noisy = sigma[:, None, None] * noise + (1 - sigma[:, None, None]) * x0
    x = np.where(known[..., None], x0_known, noisy)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a, np.float32))  # noqa: E731
    return (as_tensor(x), as_tensor(known), as_tensor(audio), as_tensor(sigma), as_tensor(noise - x0),
            as_tensor(weights))


def train_step(model, optimiser, x, known, audio, sigma, target, weights) -> float:
    velocity = model(x, known, audio, sigma)
    unknown = (1 - known)[..., None]
    weights = weights * unknown
    loss = (((velocity - target) ** 2) * weights).sum() / weights.sum()
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()
    return loss.item()


def save(model: MotionDiT, out: Path, config: TrainConfig, step: int) -> None:
    from safetensors.numpy import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = config_metadata(model.config)
    metadata["training"] = json.dumps({**asdict(config), "steps_done": step,
                                       "command": "python -m training.motion.train (see the module docstring)"})
    partial = out.with_name(out.name + ".part")
    save_file(model.numpy_params(), str(partial), metadata=metadata)
    partial.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[Path(".cache/real-data"), Path(".cache/motion-data")],
                        help="data sets (each with train.npz): real faces first, then the synthetic recipe")
    parser.add_argument("--shares", type=float, nargs="+", default=list(TrainConfig.shares),
                        help="share of examples from each data set")
    parser.add_argument("--jaw-gains", type=float, nargs="+", default=list(TrainConfig.jaw_gains),
                        help="jaw target scale for each data set")
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--minutes", type=float, default=TrainConfig.minutes)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--closure-weight", type=float, default=TrainConfig.closure_weight)
    parser.add_argument("--threads", type=int, default=TrainConfig.threads)
    parser.add_argument("--lookahead", type=int, default=2,
                        help="frames of audio heard beyond the frame moved (adds as many x 40 ms of latency)")
    args = parser.parse_args()
    model_config = MotionDiTConfig(lookahead=args.lookahead)
    result = train(args.data, args.out, TrainConfig(seed=args.seed, steps=args.steps, minutes=args.minutes,
                                                       shares=tuple(args.shares), jaw_gains=tuple(args.jaw_gains),
                                                       closure_weight=args.closure_weight,
                                                       threads=args.threads),
                   model_config)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
