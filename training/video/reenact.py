"""Re-enactment: a video avatar driven by the person's own held-out speech, against the real footage of it.

    python -m training.video.reenact [--out .cache/video] [--sheets .cache/sheets]

Per case an avatar is prepared from some clips of one person (joined into one upload,
as a user would film a longer take) and driven, as one live session is (two-frame
chunks through the MotionDiT and the lip-closure detector), by the sound of clips it
never saw, followed by silence so the idle walk is measured too. mediapipe tracks the
rendered frames and the real footage of the same clips, cut to the avatar's own framing:
- corr: Pearson correlation of the mouth openings per held-out clip, mean over clips
  (the source's audio/video offset is taken out first, as in the lip-sync evaluation);
- follows_model: correlation of our mouth opening with the motion model's jaw coefficient
  that drove it: how faithfully the renderer shows the motion, apart from the motion itself;
- amplitude: median over clips of std(ours) / std(real);
- face_found: share of rendered frames in which mediapipe finds the face;
- sharpness: mean variance of the Laplacian of the mouth region, ours over the held-out
  footage's; sharpness_vs_clip: ours over the avatar's own clip's (where the held-out
  footage is another shot, at another zoom, as in the address, only this one compares
  like with like);
- head_jump: the largest frame-to-frame move of the head points in our frames, against
  the 99th percentile of the real footage's (both in output pixels).

With --drive footage the held-out footage's own fitted mouth drives the avatar in place of
the motion model's: the correlation a perfect motion would reach through this renderer
and this measurement (follows_model then compares with the footage's jaw).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from engine.assembly import model_motion
from engine.core import motion
from engine.families.portrait.rig_fit import fit_clip, mouth_opening
from engine.families.video import walk
from engine.families.video.mouth import sharpness
from engine.families.video.prepare import crop_square, prepare_clip
from engine.families.video.reference import SUFFIX, VideoReference
from engine.families.video.renderer import VideoRenderer
from engine.families.video.tracking import track_landmarks
from training.motion.evaluate import run_motion
from training.motion.real_data import av_offset, shifted
from training.motion.real_faces import REAL_TALKING, read_clip

from .clips import join_clips

SILENCE_S = 20.0


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    avatar: list[Path]
    driven: list[Path]


def cases(root: Path = REAL_TALKING) -> list[Case]:
    grid = sorted((root / "grid-s1").glob("*.mp4"))
    wh = root / "obama-weekly-address"
    crema = sorted((root / "crema-d").glob("*.flv"))
    sentences = sorted(wh.glob("sentence_*.mp4"))
    # the address: made from four sentences, driven by the fifth, each sentence in turn
    return [
        *(Case(f"obama-{held.stem[-1]}", "obama", [p for p in sentences if p != held], [held]) for held in sentences),
        Case("grid-s1", "grid-s1", grid[:20], grid[-20:]),
        Case("crema-d", "crema-d", [p for p in crema if "_SAD_" not in p.name],
             [p for p in crema if "_SAD_" in p.name]),
    ]


def mouth_sharpness(frames: list[np.ndarray], landmarks: np.ndarray) -> float:
    """Mean mouth sharpness (mouth.sharpness) over the frames where a face was found."""
    out = [sharpness(rgb, lm) for rgb, lm in zip(frames, landmarks) if np.isfinite(lm[0, 0])]
    return float(np.mean(out)) if out else 0.0


def head_steps(landmarks: np.ndarray) -> np.ndarray:
    """walk.head_steps where both frames have a face."""
    step = walk.head_steps(landmarks)
    return step[np.isfinite(step)]


def cropped(frames: list[np.ndarray], crop: np.ndarray, size: int) -> list[np.ndarray]:
    return [crop_square(f, crop, size) for f in frames]


def run_case(case: Case, out: Path, sheets: Path | None, drive: str = "sound", log=print) -> dict:
    upload = out / f"{case.name}-avatar.mp4"
    _, source_pcm = join_clips(case.avatar, upload)
    avatar_id = prepare_clip(upload, out / "avatars", model_motion)
    ref = VideoReference.load(out / "avatars" / f"{avatar_id}{SUFFIX}")
    offset = av_offset([("avatar", ref.landmarks, source_pcm)])
    real = [read_clip(p) for p in case.driven]
    real_frames = [cropped(frames, ref.crop, ref.size) for frames, _ in real]
    real_tracks = [track_landmarks(frames) for frames in real_frames]
    # one session: every held-out clip's sound in turn, then silence
    pcm = np.concatenate([shifted(p, offset) for _, p in real] + [np.zeros(int(SILENCE_S * 48_000), np.int16)])
    coeffs, _ = run_motion("dit", pcm)
    if drive == "footage":
        coeffs = footage_mouth(coeffs, real_tracks)
        ref = replace(ref, mouth_gain=np.ones_like(ref.mouth_gain))  # the person's own keys need no gain
    renderer = VideoRenderer(ref)
    state = renderer.new_state(0)
    ours = [renderer.render(c, state) for c in coeffs]
    ours_lm = track_landmarks(ours)
    corr, follows, ratio, sharp_ours, sharp_real, real_steps = [], [], [], [], [], []
    start = 0
    for frames, real_lm in zip(real_frames, real_tracks):
        n = min(len(frames), len(coeffs) - start)
        frames, real_lm = frames[:n], real_lm[:n]
        a = mouth_opening(np.nan_to_num(ours_lm[start:start + n]))
        b = mouth_opening(np.nan_to_num(real_lm))
        corr.append(float(np.corrcoef(a, b)[0, 1]) if a.std() > 1e-6 else 0.0)
        follows.append(float(np.corrcoef(a, coeffs[start:start + n, motion.INDEX["jaw_open"]])[0, 1]))
        ratio.append(float(a.std() / max(b.std(), 1e-6)))
        sharp_ours.append(mouth_sharpness(ours[start:start + n], ours_lm[start:start + n]))
        sharp_real.append(mouth_sharpness(frames, real_lm))
        real_steps.append(head_steps(real_lm))
        start += n
    real_p99 = float(np.percentile(np.concatenate(real_steps + [head_steps(ref.landmarks)]), 99))
    steps = head_steps(ours_lm)
    # the clip's own frames in the shot the walk keeps to (another shot may be zoomed otherwise)
    home = np.flatnonzero(renderer.walk.home)
    sample = home[np.linspace(0, len(home) - 1, min(200, len(home))).round().astype(int)]
    sharp_clip = mouth_sharpness([ref.decode(int(i)) for i in sample], ref.landmarks[sample])
    result = {"case": case.name, "drive": drive, "avatar_seconds": round(ref.frames / 25, 1), "driven_clips": len(real),
              "av_offset_frames": offset, "corr": round(float(np.mean(corr)), 3),
              "follows_model": round(float(np.mean(follows)), 3),
              "amplitude": round(float(np.median(ratio)), 3),
              "face_found": round(float(np.isfinite(ours_lm[:, 0, 0]).mean()), 4),
              "sharpness_ratio": round(float(np.mean(sharp_ours) / max(np.mean(sharp_real), 1e-6)), 3),
              "sharpness_vs_clip": round(float(np.mean(sharp_ours) / max(sharp_clip, 1e-6)), 3),
              "head_jump_max_px": round(float(steps.max()), 2), "real_head_step_p99_px": round(real_p99, 2),
              "head_jump_ratio": round(float(steps.max() / max(real_p99, 1e-6)), 2)}
    log(json.dumps(result))
    if sheets is not None:
        contact_sheet(ours[: start], sheets / f"video-{case.name}.png")
    return result


def footage_mouth(coeffs: np.ndarray, tracks: list[np.ndarray]) -> np.ndarray:
    """The session's motion with each held-out clip's own fitted mouth in place of the model's:
    what the renderer and the measurement keep of a perfect motion."""
    out, start = coeffs.copy(), 0
    for landmarks in tracks:
        n = min(len(landmarks), len(out) - start)
        out[start:start + n, motion.MOUTH_INDEX] = fit_clip(landmarks[:n])[:, motion.MOUTH_INDEX]
        start += n
    return out


def contact_sheet(frames: list[np.ndarray], path: Path, tiles: int = 16) -> None:
    """tiles frames spread over the speech, four to a row, at half size."""
    pick = np.linspace(0, len(frames) - 1, tiles).round().astype(int)
    small = [cv2.resize(frames[i], None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA) for i in pick]
    sheet = np.vstack([np.hstack(small[i:i + 4]) for i in range(0, tiles, 4)])
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/video"))
    parser.add_argument("--sheets", type=Path, default=None)
    parser.add_argument("--case", action="append", help="run only these cases")
    parser.add_argument("--drive", choices=("sound", "footage"), default="sound",
                        help="footage: the held-out footage's own fitted mouth drives the avatar instead of the "
                             "motion model (the renderer's ceiling)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_case(c, args.out, args.sheets, args.drive) for c in cases()
               if not args.case or c.name in args.case or c.name.split("-")[0] in args.case]
    print(json.dumps({"cases": results, "by_person": by_person(results)}))


def by_person(results: list[dict]) -> dict:
    """Each figure averaged over a person's cases (the address's five folds)."""
    people: dict[str, list[dict]] = {}
    for r in results:
        people.setdefault(r["case"].split("-")[0], []).append(r)
    keys = ("corr", "follows_model", "amplitude", "face_found", "sharpness_ratio", "sharpness_vs_clip",
            "head_jump_ratio")
    return {p: {k: round(float(np.mean([r[k] for r in rs])), 3) for k in keys} | {"cases": len(rs)}
            for p, rs in people.items()}


if __name__ == "__main__":
    main()
