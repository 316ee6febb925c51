"""Real people talking: face landmarks on every frame of the real clips, with their audio.

    python -m training.motion.real_faces --out .cache/real-faces

Each clip of ../shared/data/real-talking/ is decoded once: its video resampled to the
engine's 25 fps timeline (the source frame nearest each 40 ms tick), mediapipe face mesh
(468 points, tracking mode) on every frame, and its sound as 48 kHz mono int16 starting
at the first video frame, so frame k and audio samples [k * 1920, (k + 1) * 1920) are
the same moment, as in a live session. One .npz per clip under --out/<source>/; a clip
already there is skipped, so an interrupted run resumes. Frames with no face are NaN.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import av
import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.families.video import clip
from engine.families.video.tracking import track_landmarks

REAL_TALKING = Path(__file__).resolve().parents[3] / "shared" / "data" / "real-talking"
SOURCES = {  # folder -> source name; a source is held out or trained on as a whole
    "grid-s1": "grid-s1",
    "grid-samples": "grid-other",
    "obama-weekly-address": "obama",
    "crema-d": "crema-d",
}
VIDEO_SUFFIXES = {".mp4", ".mpg", ".flv", ".mov", ".webm"}


@dataclass(frozen=True)
class Clip:
    source: str
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem


def find_clips(root: Path = REAL_TALKING) -> list[Clip]:
    return [Clip(source, p) for folder, source in SOURCES.items()
            for p in sorted((root / folder).glob("*")) if p.suffix.lower() in VIDEO_SUFFIXES]


def read_clip(path: Path, audio: Path | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """RGB frames on the 25 fps timeline and 48 kHz mono int16 audio aligned to frame 0
    (the engine's own clip reader, as a video avatar's preparation reads its upload); the
    sound from `audio` where it is a file of its own, starting with the first frame."""
    frames = list(clip.frames(path))
    pcm = clip.sound(path) if audio is None else _sound_file(audio)
    if pcm is None or not frames:
        raise ValueError(f"{path.name} has no {'sound' if frames else 'picture'}")
    n = min(len(frames), len(pcm) // SAMPLES_PER_FRAME)
    return frames[:n], pcm[: n * SAMPLES_PER_FRAME]


def _sound_file(path: Path) -> np.ndarray:
    from engine.batch.render import audio_stream

    return np.concatenate(list(audio_stream(path)[0]))


def extract(clip: Clip, out_dir: Path) -> dict:
    target = out_dir / clip.source / f"{clip.name}.npz"
    if target.exists():
        return {"clip": clip.name, "skipped": True}
    frames, pcm = read_clip(clip.path)
    landmarks = track_landmarks(frames)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.stem + ".part.npz")
    np.savez_compressed(partial, landmarks=landmarks, pcm=pcm, size=np.array(frames[0].shape[:2]))
    partial.replace(target)
    return {"clip": clip.name, "frames": len(frames), "faces": int(np.isfinite(landmarks[:, 0, 0]).sum())}


def _extract(args: tuple[Clip, Path]) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        return extract(*args)
    except (av.error.FFmpegError, IndexError, ValueError) as exc:  # one unreadable clip must not stop the run
        return {"clip": args[0].name, "error": str(exc)[:200]}


def extract_all(out_dir: Path, root: Path = REAL_TALKING, workers: int = 2, limit: int | None = None,
                log=print) -> list[dict]:
    clips = find_clips(root)
    if limit is not None:  # a few clips of each source (CI)
        clips = [c for s in SOURCES.values() for c in [c for c in clips if c.source == s][:limit]]
    started, results = time.monotonic(), []
    with get_context("spawn").Pool(workers) as pool:
        for i, result in enumerate(pool.imap_unordered(_extract, [(c, out_dir) for c in clips]), 1):
            results.append(result)
            if "error" in result or i % 50 == 0 or i == len(clips):
                log(json.dumps({"done": i, "of": len(clips), "minutes": round((time.monotonic() - started) / 60, 1),
                                **({"error": result} if "error" in result else {})}))
    return results


def load(out_dir: Path) -> dict[str, list[tuple[str, np.ndarray, np.ndarray]]]:
    """source -> [(clip name, landmarks (T, 468, 2), pcm48 int16)], in name order."""
    out: dict[str, list] = {}
    for source in SOURCES.values():
        for path in sorted((out_dir / source).glob("*.npz")):
            if path.name.endswith(".part.npz"):
                continue
            with np.load(path) as d:
                out.setdefault(source, []).append((path.stem, d["landmarks"], d["pcm"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/real-faces"))
    parser.add_argument("--root", type=Path, default=REAL_TALKING)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="clips per source (a quick run)")
    args = parser.parse_args()
    results = extract_all(args.out, args.root, args.workers, args.limit)
    print(json.dumps({"clips": len(results), "errors": sum("error" in r for r in results)}))


if __name__ == "__main__":
    main()
