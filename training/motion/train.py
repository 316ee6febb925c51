"""Train the MotionDiT with flow matching on the recipe's data; writes engine/weights.

    python -m training.motion.recipe --out .cache/motion-data --scale 0.8 --seed 0
    python -m training.motion.train --data .cache/motion-data --steps 20741 --seed 0

Each example is one window of frames from one sequence, in one of three roles the
engine asks of the model: an N chunk (the first window - chunk frames are known), an
I chunk (all frames known but the one after the context) or a session start (an N
chunk whose context is a neutral face over digital silence). Known frames get a little
noise so the model tolerates its own imperfect boundary motion at run time. The loss
is the flow-matching velocity error on the unknown frames, mouth channels weighted up.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from engine import motion
from engine.modules.mel_features import SILENCE
from engine.modules.motion_dit import WEIGHTS, MotionDiTConfig, config_metadata

from .model import MotionDiT



@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    batch: int = 128
    lr: float = 5e-4
    warmup: int = 200
    steps: int = 20_741
    minutes: float = 55.0
    """A safety limit only: the schedule follows the steps (about 31 minutes on 2 cores)."""
    mouth_weight: float = 3.0
    context_noise: float = 0.08
    threads: int = 2


class Windows:
    """Random training windows over the frames of all sequences."""

    def __init__(self, data: dict, window: int):
        self.features = data["features"].astype(np.float32)
        self.motion = data["motion"].astype(np.float32)
        starts = data["starts"]
        self.valid = np.concatenate([np.arange(a, b - window + 1) for a, b in zip(starts[:-1], starts[1:])
                                     if b - a >= window])
        self.window = window

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        first = self.valid[rng.integers(len(self.valid), size=size)]
        index = first[:, None] + np.arange(self.window)
        return self.motion[index], self.features[index]


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


def train(data_dir: Path, out: Path, config: TrainConfig, model_config: MotionDiTConfig = MotionDiTConfig(),
          log=print) -> dict:
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    data = dict(np.load(data_dir / "train.npz"))
    windows = Windows(data, model_config.window)
    model = MotionDiT(model_config)
    stats = normalisation(windows)
    for name, value in stats.items():
        getattr(model, name).copy_(torch.from_numpy(value))
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    weights = torch.ones(model_config.motion_dim)
    weights[[motion.INDEX[k] for k in motion.MOUTH]] = config.mouth_weight
    started, step, recent = time.monotonic(), 0, []
    while step < config.steps and time.monotonic() - started < config.minutes * 60:
        # cosine decay over the steps, not the clock, so the same command gives the same weights
        lr = config.lr * min(1.0, (step + 1) / config.warmup) * 0.5 * (1 + np.cos(np.pi * step / config.steps))
        for group in optimiser.param_groups:
            group["lr"] = lr
        loss = train_step(model, optimiser, *example(windows, rng, config, model_config, stats), weights)
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


def example(windows: Windows, rng: np.random.Generator, config: TrainConfig, c: MotionDiTConfig,
            stats: dict[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
    motion_, features = windows.batch(rng, config.batch)
    known, start = known_masks(rng, config.batch, c)
    context = c.window - c.chunk
    motion_[start, :context] = 0.0
    features[start, :context] = SILENCE
    x0 = (motion_ - stats["motion_mean"]) / stats["motion_std"]
    audio = (features - stats["feature_mean"]) / stats["feature_std"]
    x0_known = x0 + rng.standard_normal(x0.shape) * config.context_noise * rng.random((len(x0), 1, 1))
    noise = rng.standard_normal(x0.shape)
    sigma = 1 / (1 + np.exp(-rng.standard_normal(len(x0))))  # logit-normal, as in SD3
    noisy = sigma[:, None, None] * noise + (1 - sigma[:, None, None]) * x0
    x = np.where(known[..., None], x0_known, noisy)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a, np.float32))  # noqa: E731
    return as_tensor(x), as_tensor(known), as_tensor(audio), as_tensor(sigma), as_tensor(noise - x0)


def train_step(model, optimiser, x, known, audio, sigma, target, weights) -> float:
    velocity = model(x, known, audio, sigma)
    unknown = (1 - known)[..., None]
    loss = (((velocity - target) ** 2) * weights * unknown).sum() / (unknown.sum() * weights.mean() * x.shape[-1])
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
    parser.add_argument("--data", type=Path, default=Path(".cache/motion-data"))
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--minutes", type=float, default=TrainConfig.minutes)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = train(args.data, args.out, TrainConfig(seed=args.seed, steps=args.steps, minutes=args.minutes))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
