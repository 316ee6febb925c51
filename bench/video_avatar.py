"""Benchmark video avatars: preparing a one-minute clip, rendering frames, contact sheets.

    .venv/bin/python bench/video_avatar.py [--out .cache/video-bench]

Prints JSON:
- prepare: seconds to prepare a 59 s clip of a real person (GRID s1's first 20 takes,
  joined, 360x288), beside the baseline of decoding that clip once; prepare_720p the same
  for a minute at 1280x720 (the address's five sentences, four times over);
- render: ms per 512x512 I420 frame of the video avatar (walk, mouth bank, composite),
  beside the portrait renderer's on the default avatar, one core;
- sheets: contact sheets (PNG) of the video avatar saying jfk.flac and a held-out GRID
  sentence, and `avatar`: the prepared file, for bench/session.py, soak.py and load.py
  (`--avatar`).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as a worker runs

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.assembly import model_motion, motion_stages  # noqa: E402
from engine.core.pipeline import Pipeline  # noqa: E402
from engine.core.stream import motion_track  # noqa: E402
from engine.families.motion.delay import motion_delay_frames  # noqa: E402
from engine.families.portrait.avatar import DEFAULT_AVATAR, load_portrait  # noqa: E402
from engine.families.portrait.renderer import PortraitRenderer  # noqa: E402
from engine.families.video.clip import frames  # noqa: E402
from engine.families.video.prepare import prepare_clip  # noqa: E402
from engine.families.video.reference import SUFFIX, VideoReference  # noqa: E402
from engine.families.video.renderer import VideoRenderer  # noqa: E402
from testkit.server import SHARED_DATA  # noqa: E402
from training.motion.real_faces import read_clip  # noqa: E402
from training.video.clips import join_clips  # noqa: E402
from training.video.reenact import contact_sheet  # noqa: E402

GRID = sorted((SHARED_DATA / "real-talking" / "grid-s1").glob("*.mp4"))
ADDRESS = sorted((SHARED_DATA / "real-talking" / "obama-weekly-address").glob("*.mp4"))  # 1280x720


def prepare(out: Path, name: str, takes: list[Path]) -> tuple[Path, dict]:
    clip = out / f"{name}.mp4"
    frame_count, _ = join_clips(takes, clip)
    started = time.perf_counter()
    sum(1 for _ in frames(clip))
    decode_s = time.perf_counter() - started
    folder = out / f"avatars-{int(time.time())}"  # fresh: the preparation is timed, not its cache
    started = time.perf_counter()
    avatar_id = prepare_clip(clip, folder, model_motion, progress=lambda share, stage: sys.stderr.write(
        f"\rpreparing: {share:4.0%} {stage:24s}"))
    sys.stderr.write("\n")
    return folder / f"{avatar_id}{SUFFIX}", {
        "clip_seconds": round(frame_count / 25, 1), "seconds": round(time.perf_counter() - started, 1),
        "baseline_decode_once_seconds": round(decode_s, 1)}


def speech(path: Path) -> np.ndarray:
    return read_clip(path)[1] if path.suffix == ".mp4" else _flac(path)


def _flac(path: Path) -> np.ndarray:
    import av

    with av.open(str(path)) as container:
        resampler = av.AudioResampler("s16", "mono", 48_000)
        blocks = [o.to_ndarray().reshape(-1) for f in container.decode(audio=0) for o in resampler.resample(f)]
    return np.concatenate(blocks).astype(np.int16)


def render_speed(avatar: Path, coeffs: np.ndarray) -> dict:
    video = VideoRenderer(VideoReference.load(avatar))
    state = video.new_state(0)
    portrait = PortraitRenderer(load_portrait(DEFAULT_AVATAR))

    def ms(render) -> float:  # type: ignore[no-untyped-def]
        started = time.process_time()
        for c in coeffs:
            render(c)
        return round(1000 * (time.process_time() - started) / len(coeffs), 2)
    cv2.setNumThreads(1)
    return {"video_ms_per_frame": ms(lambda c: video.render_i420(c, state)),
            "baseline_portrait_ms_per_frame": ms(portrait.render_i420), "frames": len(coeffs)}


def sheets(avatar: Path, out: Path) -> tuple[dict, np.ndarray]:
    pipeline, delay = Pipeline(motion_stages("dit")), motion_delay_frames("dit")
    video = VideoRenderer(VideoReference.load(avatar))
    written, all_coeffs = {}, []
    for name, path in (("jfk", SHARED_DATA / "jfk.flac"), ("grid-heldout", GRID[-1])):
        coeffs = motion_track(pipeline, speech(path), delay)
        state = video.new_state(1)
        contact_sheet([video.render(c, state) for c in coeffs], out / f"video-avatar-{name}.png")
        written[name] = str(out / f"video-avatar-{name}.png")
        all_coeffs.append(coeffs)
    return written, np.concatenate(all_coeffs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "video-bench")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    avatar, prep = prepare(args.out, "grid-s1-minute", GRID[:20])
    _, prep_720p = prepare(args.out, "address-720p-minute", ADDRESS * 4)
    written, coeffs = sheets(avatar, args.out)
    print(json.dumps({"prepare": prep, "prepare_720p": prep_720p, "render": render_speed(avatar, coeffs),
                      "sheets": written, "avatar": str(avatar)}, indent=2))


if __name__ == "__main__":
    main()
