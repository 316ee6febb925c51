"""Every photo talks: the public-domain portraits of tests/fixtures/portraits saying real speech.

    python -m training.portrait.photo_set [--audio ../shared/data/jfk.flac] [--sheet .cache/photos.png]

Each photo is prepared as an upload is (cropped to the face, analysed), the recording's
motion (the engine's stages, streamed as a live session runs them) is drawn by the real
portrait renderer, through I420 as a viewer gets it, and mediapipe measures the mouth on
frames scaled as the judge scales them (opening: points 13-14 over the eye distance
33-263). Per photo: the opening's std while speaking and while idle (the same seconds of
silence), its 95th percentile, and the speaking std over the default portrait's. The sheet
shows each photo's four widest mouths and its widest whole frame. Prints JSON.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one core, as the engine runs: set before numpy loads
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from engine.batch.render import audio_stream  # noqa: E402
from engine.families.portrait.avatar import (  # noqa: E402
    DEFAULT_AVATAR,
    Portrait,
    decode_image,
    load_portrait,
    prepare_portrait,
)
from engine.families.portrait.renderer import PortraitRenderer  # noqa: E402
from training.motion import judge  # noqa: E402
from training.motion.evaluate import JFK, run_motion  # noqa: E402

PHOTOS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "portraits"
IDLE_S = 4.0
TILE = (192, 128)


def speech_track(audio: Path = JFK) -> np.ndarray:
    """The motion of a recording (48 kHz), as `avatar-render` streams it."""
    blocks, _ = audio_stream(audio)
    return run_motion("dit", np.concatenate(list(blocks)))[0]


def idle_track(seconds: float = IDLE_S) -> np.ndarray:
    return run_motion("dit", np.zeros(int(48000 * seconds), np.int16))[0]


def photo(path: Path) -> Portrait:
    """A photo prepared as an upload is; the bundled default as it ships."""
    return load_portrait(path) if path == DEFAULT_AVATAR else prepare_portrait(decode_image(path.read_bytes()))


def frames(renderer: PortraitRenderer, track: np.ndarray) -> list[np.ndarray]:
    """RGB frames after the I420 conversion every viewer's frames go through."""
    return [cv2.cvtColor(renderer.render_i420(c), cv2.COLOR_YUV2RGB_I420) for c in track]


def opening(shown: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The judge's landmarks (256 px wide frames) and the mouth's opening in eye distances."""
    lm = judge.landmarks(shown)
    return lm, judge.mouth_measures(lm)["opening"]


def measure(portrait: Portrait, speech: np.ndarray, idle: np.ndarray) -> tuple[dict, np.ndarray]:
    """The mouth's figures for one portrait, and its row of the contact sheet."""
    renderer = PortraitRenderer(portrait)
    shown = frames(renderer, speech)
    lm, said = opening(shown)
    quiet = opening(frames(renderer, idle))[1]
    picks = judge.widest(said)
    mouths = [judge.mouth_crop(shown[i], lm[i], TILE) for i in picks]
    whole = cv2.resize(shown[picks[0]], (TILE[1], TILE[1]), interpolation=cv2.INTER_AREA)
    figures = {"std": _round(np.nanstd(said)), "idle_std": _round(np.nanstd(quiet)),
               "p95": _round(np.nanpercentile(said, 95)), "no_face_frames": int(np.isnan(said).sum()),
               "widest": [_round(said[i]) for i in picks]}
    return figures, np.hstack([*mouths, whole])


def _round(v: float) -> float:
    return round(float(v), 4)


def photo_set(audio: Path = JFK, folder: Path = PHOTOS, sheet: Path | None = None) -> dict:
    speech, idle = speech_track(audio), idle_track()
    out, rows = {}, []
    for path in [DEFAULT_AVATAR, *sorted(folder.glob("*.jpg")), *sorted(folder.glob("*.png"))]:
        figures, row = measure(photo(path), speech, idle)
        out[path.stem] = figures
        rows.append(_labelled(row, path.stem))
    default = out[DEFAULT_AVATAR.stem]["std"]
    for figures in out.values():
        figures["of_default"] = round(figures["std"] / default, 3)
        figures["of_idle"] = round(figures["std"] / max(figures["idle_std"], 1e-6), 1)
    if sheet:
        sheet.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(sheet), cv2.cvtColor(np.vstack(rows), cv2.COLOR_RGB2BGR))
    return out


def _labelled(row: np.ndarray, name: str) -> np.ndarray:
    row = row.copy()
    cv2.putText(row, name, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 0), 1, cv2.LINE_AA)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--audio", type=Path, default=JFK)
    parser.add_argument("--photos", type=Path, default=PHOTOS)
    parser.add_argument("--sheet", type=Path, default=Path(".cache/photos.png"))
    args = parser.parse_args()
    print(json.dumps(photo_set(args.audio, args.photos, args.sheet), indent=1))


if __name__ == "__main__":
    main()
