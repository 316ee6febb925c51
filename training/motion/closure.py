"""Train the lip-closure detector on force-aligned p/b/m; writes engine/weights/lip_closure.safetensors.

    python -m training.motion.real_data --faces .cache/real-faces --out .cache/real-data
    python -m training.motion.recipe --out .cache/motion-data --scale 0.5 --seed 0
    python -m training.motion.closure --data .cache/real-data .cache/motion-data --steps 8000 --seed 0

Labels: the frames inside each p, b and m, force-aligned by pocketsphinx to the
sentences of GRID's s1 (real_data.py stores them beside the features of the clean clip
and its degraded copies) and the phoneme timings of the synthetic voices (recipe.py).
Each example is the rows `context` frames before to `lookahead` frames after one frame,
as MotionStage holds them; a tenth start inside the session's opening silence. The
last twentieth of each set's sequences is held back, and the log reports precision and
recall there (the evaluation on held-out real speakers is real_eval.py).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from engine.core.module import config_metadata
from engine.families.motion.lip_closure import WEIGHTS, LipClosureConfig
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.motion.mel_features import SILENCE

from .visemes import Segment, frames_of


@dataclass(frozen=True)
class ClosureTrainConfig:
    seed: int = 0
    steps: int = 8000
    batch: int = 512
    lr: float = 2e-3
    shares: tuple[float, ...] = (0.6, 0.4)
    """Share of examples from each --data set: real faces, then synthetic voices."""
    held_back: float = 0.05
    threads: int = 2


class Member(nn.Module):
    def __init__(self, c: LipClosureConfig):
        super().__init__()
        self.row = nn.Linear(c.input_dim, c.row_dim)
        self.fc1 = nn.Linear(c.rows * c.row_dim, c.hidden)
        self.fc2 = nn.Linear(c.hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.row(x), approximate="tanh").flatten(1)
        return self.fc2(F.gelu(self.fc1(h), approximate="tanh"))[:, 0]


class ClosureNet(nn.Module):
    """The torch twin of engine.families.motion.lip_closure.LipClosure (same parameter names):
    forward gives each member's logits (members, B), each trained on its own."""

    def __init__(self, c: LipClosureConfig):
        super().__init__()
        self.members = nn.ModuleList(Member(c) for _ in range(c.members))
        self.register_buffer("feature_mean", torch.zeros(c.input_dim))
        self.register_buffer("feature_std", torch.ones(c.input_dim))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        x = torch.cat([rows, rows - rows.mean(1, keepdim=True)], -1)
        x = (x - self.feature_mean) / self.feature_std
        return torch.stack([member(x) for member in self.members])

    def probability(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(rows)).mean(0)


def labels(data: dict) -> np.ndarray:
    """(frames,) 0/1 per frame of one data set: stored (real faces) or from phone timings."""
    if "bilabial" in data:
        return data["bilabial"].astype(np.float32)
    out, starts = np.zeros(len(data["features"]), np.float32), data["starts"]
    names = list(data["visemes"])
    for seq, v, a, b in data["segments"]:
        if names[int(v)] == "BMP":
            first, frames = starts[int(seq)], starts[int(seq) + 1] - starts[int(seq)]
            out[first + frames_of(Segment("BMP", a, b), frames, slack=0.0)] = 1
    return out


class Examples:
    """Frames of several data sets whose rows lie inside their own sequence, split by sequence."""

    def __init__(self, sets: list[dict], c: LipClosureConfig, held_back: float, augment: bool = True):
        self.augment = augment
        # the log-mel columns: the motion model's data may carry the speech encoder's beside them
        self.features = np.concatenate([d["features"][:, :MEL_DIM] for d in sets]).astype(np.float32)
        self.labels = np.concatenate([labels(d) for d in sets])
        self.train, self.held, offset = [], [], 0
        for d in sets:
            spans = [(a + offset, b + offset) for a, b in zip(d["starts"][:-1], d["starts"][1:])]
            cut = int(len(spans) * (1 - held_back))
            centres = lambda part: np.concatenate([np.arange(a + c.context, b - c.lookahead) for a, b in part  # noqa: E731
                                                   if b - a > c.rows])
            self.train.append(centres(spans[:cut]))
            self.held.append(centres(spans[cut:]))
            offset += len(d["features"])
        self.c = c

    def rows(self, centres: np.ndarray) -> np.ndarray:
        return self.features[centres[:, None] + np.arange(-self.c.context, self.c.lookahead + 1)]

    def batch(self, rng: np.random.Generator, size: int, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        which = rng.choice(len(self.train), size=size, p=shares)
        centres = np.array([self.train[w][rng.integers(len(self.train[w]))] for w in which])
        rows = recorded(self.rows(centres), rng) if self.augment else self.rows(centres)
        start = rng.random(size) < 0.1  # a session's first frames: digital silence before them
        cut = rng.integers(1, self.c.context + 1, size)
        rows[start[:, None] & (np.arange(self.c.rows)[None] < cut[:, None])] = SILENCE
        return rows, self.labels[centres]


def recorded(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Log-mel rows (B, R, 2 * BANDS) as another microphone and room would give them.

    Per example: a level change, a smooth tilt across the bands, a lower band edge above
    which the level falls away (old or coded recordings), and a noise floor under it all.
    The clips' own degraded copies (channel.py) cover coding; this covers the rest cheaply.
    """
    b, bands = len(rows), rows.shape[-1] // 2
    k = np.arange(bands) / (bands - 1)
    tilt = (rng.uniform(-0.6, 0.6, (b, 1)) * (k - 0.5) + rng.uniform(-0.2, 0.2, (b, 1)) * np.cos(2 * np.pi * k)
            + rng.uniform(-1.5, 0.5, (b, 1)))
    edge = rng.uniform(0.55, 1.3, (b, 1))  # band index (share of bands) where the roll-off starts
    tilt -= np.where(rng.random((b, 1)) < 0.3, 3 * np.maximum(k - edge, 0) / 0.2, 0)
    floor = rng.uniform(-6.0, -3.5, (b, 1)) + rng.uniform(-0.5, 0.5, (b, 1)) * k
    curve = np.concatenate([tilt, tilt], 1)[:, None]
    noise = np.concatenate([floor, floor], 1)[:, None]
    return np.log10(10 ** (rows + curve) + 10 ** noise).astype(np.float32)


def train(data_dirs: list[Path], out: Path, config: ClosureTrainConfig,
          c: LipClosureConfig = LipClosureConfig(), log=print) -> dict:
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = np.random.default_rng(config.seed)
    examples = Examples([dict(np.load(d / "train.npz")) for d in data_dirs], c, config.held_back)
    shares = np.asarray(config.shares[: len(data_dirs)], np.float64)
    net = ClosureNet(c)
    sample = examples.batch(np.random.default_rng(config.seed + 1), 20_000, shares / shares.sum())[0]
    sample = np.concatenate([sample, sample - sample.mean(1, keepdims=True)], -1)
    net.feature_mean.copy_(torch.from_numpy(sample.mean((0, 1))))
    net.feature_std.copy_(torch.from_numpy(np.maximum(sample.std((0, 1)), 1e-2)))
    optimiser = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=0.01)
    started, recent = time.monotonic(), []
    for step in range(1, config.steps + 1):
        for group in optimiser.param_groups:  # cosine decay over the steps
            group["lr"] = config.lr * 0.5 * (1 + np.cos(np.pi * step / config.steps))
        rows, target = examples.batch(rng, config.batch, shares / shares.sum())
        logits = net(torch.from_numpy(rows))
        loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(target).expand_as(logits))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        recent.append(loss.item())
        if step % 500 == 0 or step == config.steps:
            log(json.dumps({"step": step, "loss": round(float(np.mean(recent)), 4),
                            "minutes": round((time.monotonic() - started) / 60, 1)}))
            recent = []
    save(net, out, c, config)
    return {"steps": config.steps, "held_back": held_back_scores(net, examples)}


def held_back_scores(net: ClosureNet, examples: Examples) -> list[dict]:
    """Per data set: precision and recall of p/b/m frames at probability 0.5 on held-back sequences."""
    out = []
    for centres in examples.held:
        with torch.no_grad():
            said = net.probability(torch.from_numpy(examples.rows(centres))).numpy() > 0.5
        truth = examples.labels[centres] > 0.5
        out.append({"frames": len(centres), "precision": round(float(truth[said].mean()), 3) if said.any() else None,
                    "recall": round(float(said[truth].mean()), 3) if truth.any() else None})
    return out


def save(net: ClosureNet, out: Path, c: LipClosureConfig, config: ClosureTrainConfig) -> None:
    from safetensors.numpy import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = config_metadata(c)
    metadata["training"] = json.dumps({**asdict(config), "command": "python -m training.motion.closure"})
    params = {k: v.detach().cpu().float().numpy().copy() for k, v in net.state_dict().items()}
    partial = out.with_name(out.name + ".part")
    save_file(params, str(partial), metadata=metadata)
    partial.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[Path(".cache/real-data"), Path(".cache/motion-data")])
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--steps", type=int, default=ClosureTrainConfig.steps)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(train(args.data, args.out, ClosureTrainConfig(seed=args.seed, steps=args.steps))))


if __name__ == "__main__":
    main()
