"""The motion model's training data: speech from offline voices with motion targets.

    python -m training.motion.recipe --out .cache/motion-data [--scale 1.0] [--seed 0]

Sequences are a few utterances of one voice joined by pauses of 0.15-2.5 s, with lead
and tail silence, so the model learns idle and listening motion as well as speech.
Each sequence is then augmented (tempo and pitch by resampling, loudness, background
noise, room reverb). Targets: mouth curves from the synthesiser's phoneme timings
(visemes.py), the jaw scaled by the frame's emphasis (jaw_target), plus idle
motion (blinks, breathing, head sway, nods while speaking) from the procedural idle
generator, seeded per sequence. Features are the engine's own log-mel rows, computed
by the same code the live pipeline runs.

Writes train.npz (piper, espeak-ng, and flite kal/awb/rms) and heldout.npz (flite slt,
a voice the model never hears in training); each holds the frames of all sequences
end to end, where each sequence starts, and the viseme segments for evaluation.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import fftconvolve

from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.families.motion.emphasis import frame_db
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.speech_features import SpeechFeatureModule, stream_rows

from .corpus import sentence
from .visemes import VISEMES, Segment, mouth_curves
from .voices import FLITE_HELD_OUT, Espeak, Flite, Piper, Utterance

VISEME_NAMES = tuple(VISEMES)


@dataclass(frozen=True)
class RecipeConfig:
    seed: int = 0
    piper: int = 600
    """Utterances per source (times --scale)."""
    espeak: int = 900
    flite: int = 450
    heldout: int = 120
    per_sequence: tuple[int, int] = (2, 5)


@dataclass
class Sequence:
    pcm: np.ndarray  # int16, 48 kHz, whole frames
    segments: list[Segment]
    voice: str


def join(utterances: list[Utterance], rng: np.random.Generator) -> Sequence:
    """Utterances of one voice with silences between them, shifted segments alongside."""
    parts, segments, t = [], [], 0.0
    for i, u in enumerate(utterances):
        gap = rng.uniform(0.3, 2.0) if i == 0 else rng.uniform(0.15, 2.5)
        parts += [np.zeros(int(gap * SAMPLE_RATE), np.float32), u.audio]
        segments.append(Segment("sil", t, t + gap))
        t += gap
        segments += [Segment(s.viseme, s.start + t, s.end + t) for s in u.segments]
        t += len(u.audio) / SAMPLE_RATE
    tail = rng.uniform(0.5, 2.0)
    parts.append(np.zeros(int(tail * SAMPLE_RATE), np.float32))
    segments.append(Segment("sil", t, t + tail))
    audio = np.concatenate(parts)
    return Sequence(audio, segments, utterances[0].voice)


def augment(seq: Sequence, rng: np.random.Generator) -> Sequence:
    """Tempo/pitch, reverb, noise and loudness; returns int16 PCM cut to whole frames."""
    audio, segments = seq.pcm, seq.segments
    if rng.random() < 0.5:  # resampling shifts pitch and tempo together; timings scale with it
        factor = rng.uniform(0.92, 1.08)
        positions = np.arange(0, len(audio) - 1, factor)
        audio = np.interp(positions, np.arange(len(audio)), audio).astype(np.float32)
        segments = [Segment(s.viseme, s.start / factor, s.end / factor) for s in segments]
    audio = audio / (np.abs(audio).max() + 1e-9)
    if rng.random() < 0.3:
        audio = reverb(audio, rng)
    audio = audio * 10 ** (rng.uniform(-24, -1) / 20)
    noise_db = rng.uniform(-80, -40)  # background level, dBFS
    noise = rng.standard_normal(len(audio)).astype(np.float32)
    if rng.random() < 0.5:  # brown-ish room noise instead of hiss
        noise = np.cumsum(noise) * 0.05
        noise -= np.convolve(noise, np.ones(4800) / 4800, "same")
    noise *= 10 ** (noise_db / 20) / (noise.std() + 1e-9)
    audio = audio + noise
    frames = len(audio) // SAMPLES_PER_FRAME
    pcm = np.clip(audio[: frames * SAMPLES_PER_FRAME] * 32767, -32768, 32767).astype(np.int16)
    return Sequence(pcm, segments, seq.voice)


def reverb(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    rt60 = rng.uniform(0.15, 0.6)
    t = np.arange(int(rt60 * SAMPLE_RATE)) / SAMPLE_RATE
    impulse = rng.standard_normal(len(t)) * np.exp(-6.9 * t / rt60)
    impulse[0] = 1.0 / rng.uniform(0.2, 0.6)
    wet = fftconvolve(audio, impulse)[: len(audio)]
    return (wet / (np.abs(wet).max() + 1e-9)).astype(np.float32)


def emphasis(pcm: np.ndarray, frames: int) -> np.ndarray:
    """Per-frame jaw gain 0.4..1.15 from loudness against the sequence's loud speech.

    Louder (stressed) syllables open the jaw wider; relative to the sequence's own
    95th-percentile level, so the gain and noise augmentations do not change it.
    """
    db = np.convolve(frame_db(pcm, frames), np.ones(3) / 3, "same")
    return np.clip(1 + (db - np.percentile(db, 95)) / 25, 0.4, 1.15).astype(np.float32)


def jaw_target(viseme_jaw: np.ndarray, pcm: np.ndarray, frames: int) -> np.ndarray:
    """The viseme curve's jaw (p/b/m already shut in it) scaled by the frame's emphasis.

    Tried and not kept (see docs/motion.md): a jaw opened mainly by loudness correlates better
    with loudness but the model then shut fewer p/b/m than the 80 % required.
    """
    return viseme_jaw * emphasis(pcm, frames)


def targets(seq: Sequence, frames: int, seed: int) -> np.ndarray:
    """Mouth curves from the segments with the jaw scaled by emphasis, plus seeded idle motion (nods while speaking)."""
    track = mouth_curves(seq.segments, frames)
    track[:, 0] = jaw_target(track[:, 0], seq.pcm, frames)
    speaking = np.zeros(frames, np.float32)
    for s in seq.segments:
        if s.viseme != "sil":
            speaking[int(s.start * FPS): int(np.ceil(s.end * FPS))] = 1.0
    idle = IdleMotionModule()
    idle(track, speaking, idle.initial_state(seed))
    return track


def encode(sequences: list[Sequence], seed: int, with_pcm: bool = False) -> dict[str, np.ndarray]:
    """All sequences end to end: features, motion, starts, segments; the audio too if asked."""
    speech = SpeechFeatureModule()
    features, motion_, starts, seg_rows, voices = [], [], [0], [], []
    for i, seq in enumerate(sequences):
        frames = len(seq.pcm) // SAMPLES_PER_FRAME
        features.append(stream_rows(speech, seq.pcm, frames))
        motion_.append(targets(seq, frames, seed * 100_003 + i))
        seg_rows += [(i, VISEME_NAMES.index(s.viseme), s.start, s.end) for s in seq.segments]
        starts.append(starts[-1] + frames)
        voices.append(seq.voice)
    pcm = {"pcm": np.concatenate([s.pcm for s in sequences]), "pcm_starts": np.array(starts) * SAMPLES_PER_FRAME}
    return {
        **(pcm if with_pcm else {}),
        "features": np.concatenate(features).astype(np.float16),
        "motion": np.concatenate(motion_),
        "starts": np.array(starts),
        "segments": np.array(seg_rows, np.float64),
        "voices": np.array(voices),
        "visemes": np.array(VISEME_NAMES),
    }


def sequences(source, count: int, config: RecipeConfig, rng: np.random.Generator) -> list[Sequence]:
    """About `count` utterances in sequences of one voice each."""
    sizes = []
    while sum(sizes) < count:
        sizes.append(int(rng.integers(config.per_sequence[0], config.per_sequence[1] + 1)))
    texts = [[sentence(rng) for _ in range(n)] for n in sizes]
    if isinstance(source, Piper):  # one voice, and each call starts a process: say everything at once
        said = iter(source.say_many([t for group in texts for t in group], rng))
        groups = [[next(said) for _ in group] for group in texts]
    else:
        groups = [source.say_many(group, rng) for group in texts]
    return [augment(join(group, rng), rng) for group in groups]


def build(config: RecipeConfig, out: Path, scale: float = 1.0, log=print) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    n = lambda count: max(2, int(count * scale))  # noqa: E731
    build_heldout(config, out, n(config.heldout), log)
    train: list[Sequence] = []
    for name, source, count in (("piper", Piper(), config.piper), ("espeak-ng", Espeak(), config.espeak),
                                ("flite", Flite(), config.flite)):
        made = sequences(source, n(count), config, rng)
        log(f"{name}: {len(made)} sequences, {sum(len(s.pcm) for s in made) / SAMPLE_RATE / 60:.1f} min")
        train += made
    np.savez(out / "train.npz", **encode(train, config.seed))


def build_heldout(config: RecipeConfig, out: Path, count: int, log=print) -> None:
    """The held-out voice, from its own seed so the training draw does not change it."""
    out.mkdir(parents=True, exist_ok=True)
    held = sequences(Flite(FLITE_HELD_OUT), count, config, np.random.default_rng(config.seed + 1))
    log(f"held out flite {FLITE_HELD_OUT}: {len(held)} sequences")
    np.savez(out / "heldout.npz", **encode(held, config.seed + 1, with_pcm=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/motion-data"))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every utterance count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heldout-only", action="store_true", help="only (re)write heldout.npz")
    args = parser.parse_args()
    config = RecipeConfig(seed=args.seed)
    if args.heldout_only:
        build_heldout(config, args.out, max(2, int(config.heldout * args.scale)))
    else:
        build(config, args.out, args.scale)


if __name__ == "__main__":
    main()
