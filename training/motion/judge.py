"""Lip sync judged as a user sees it, on whole speakers the model never heard.

    python -m training.motion.judge [--out .cache/judge] [--systems dit loudness] [--sheet]

The measurement of the independent judge, reproduced: each held-out real clip's own
sound drives the engine's motion stages as `avatar-render` runs them (streamed in
two-frame chunks, the audio delay removed), the real portrait renderer draws the
default avatar, and mediapipe face mesh measures the mouth on our frames and on the
real clip's frames, both scaled to 256 px wide. Opening = inner-lip distance (points
13-14) over the eye distance (points 33-263); lip thickness = upper (0-13) plus lower
(14-17) lip height over the eye distance.

Per clip: correlation with the real opening at lag 0 and at the best lag within +-3
frames, std ratio and 95th-percentile ratio (ours / real), and lip thickness in the
widest fifth of frames over the most shut fifth. A `loudness` mouth (the jaw follows the
clip's level between its floor and its loud speech) is run beside it. Clips are averaged
per speaker first, so each speaker weighs the same; `peak_corr` is the correlation,
across clips, of our 95th-percentile opening with the real one (a calm speaker should
get a calm mouth). Phones: p/b/m with a shut frame and open vowels reaching jaw 0.25, over
all open vowels and over those the person's own mouth opened for (OPENED); open vowels also
per speaker, and their mean (`open_vowel_by_speaker`: each speaker weighs the same, as
above). `real_open_vowel` is the same line applied to the real people: the share of open
vowels where their mouth opened as far past its own shut as ours does at jaw 0.25. Shape:
mouth width (corners 61-291 over the eye distance) in the widest-open fifth of frames over
the most shut fifth (`width_gain`), and in the aligned rounded sounds (o, u, w) over the
spread ones (ee, i, e), each in its clip's median width (`rounded_over_spread`: below 1 where
the lips round), ours and the person's. The real clips' measurements are cached under
--out/real.

`--noise pink:20` or `babble:20` adds noise that many dB under each clip's speech before
the systems hear it (the real mouth and the phone timings stay those of the clean clip):
pink noise, or four GRID s1 voices talking at once.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one core, as the engine runs: set before numpy loads
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from engine.config import SAMPLE_RATE  # noqa: E402
from engine.families.motion.dit import WEIGHTS  # noqa: E402
from engine.families.portrait.avatar import DEFAULT_AVATAR  # noqa: E402
from engine.families.video import clip as video_clip  # noqa: E402
from engine.families.video.tracking import track_landmarks  # noqa: E402

from . import wild_set  # noqa: E402
from .channel import coloured_noise, with_noise  # noqa: E402
from .real_data import lagged_corr  # noqa: E402
from .real_faces import REAL_TALKING, Clip, read_clip  # noqa: E402

WIDTH = 256  # the judge scales every frame to this width before tracking
MAX_LAG = 3
SHARE = 0.2  # widest / most shut fifth of frames for the lip thickness ratio
OPENED = 0.6  # an open vowel the person opened for: their mouth reached this share of the clip's p95


@dataclass(frozen=True)
class HeldOut(Clip):
    speaker: str
    audio: Path | None = None  # the sound, where it is a file beside the picture (from its first frame)


def held_out(root: Path = REAL_TALKING) -> list[HeldOut]:
    """Every real clip of a speaker no model here trains on (GRID s1 is the one trained on).
    The other GRID speakers' names are not known, so they count as one speaker together."""
    out = [HeldOut("grid", p, "grid-other") for p in sorted((root / "grid-samples").glob("*.mpg"))]
    out += [HeldOut("crema-d", p, "crema-1001") for p in sorted((root / "crema-d").glob("*.flv"))]
    out += [HeldOut("white-house", p, "obama") for p in sorted((root / "obama-weekly-address").glob("*.mp4"))]
    for p in sorted((root / "public-domain-addresses").glob("*.mp4")):
        out.append(HeldOut("public-domain-addresses", p, "reagan" if p.stem.startswith("reagan") else "obama"))
    return out


def clip_set(split: str, wild: Path = wild_set.FOLDER) -> list[HeldOut]:
    """`legacy`: the held-out clips above (the motion model's constants were fitted on them);
    `validation`: those and the wild set's validation speakers; `test`: the wild set's test
    speakers, never tuned on (wild_set.py)."""
    chosen = [c for c in wild_set.recipe() if c.split == split]
    missing = [str(c.local(wild)) for c in chosen if not c.local(wild).exists()]
    if missing:
        raise SystemExit(f"{len(missing)} clips of the wild set are missing (first: {missing[0]}); "
                         "gather them with python -m training.motion.wild_set --repos DIR")
    out = [HeldOut(c.repo.split("/")[1], c.local(wild), c.speaker, c.local(wild, c.audio) if c.audio else None)
           for c in chosen]
    return out if split == "test" else held_out() + out


def scaled(rgb: np.ndarray) -> np.ndarray:
    h, w = rgb.shape[:2]
    return cv2.resize(rgb, (WIDTH, round(h * WIDTH / w)), interpolation=cv2.INTER_AREA)


def landmarks(frames) -> np.ndarray:
    """(T, 468, 2) landmarks of frames scaled to WIDTH, in those pixels (NaN where no face is found)."""
    return track_landmarks(scaled(f) for f in frames)


def mouth_measures(lm: np.ndarray) -> dict[str, np.ndarray]:
    """Opening, lip thickness and mouth width (corners 61-291) per frame, in eye distances."""
    eye = np.linalg.norm(lm[:, 263] - lm[:, 33], axis=-1)
    dist = lambda a, b: np.linalg.norm(lm[:, a] - lm[:, b], axis=-1) / eye  # noqa: E731
    return {"opening": dist(13, 14), "thickness": dist(0, 13) + dist(14, 17), "width": dist(61, 291)}


def real_measures(clip: HeldOut, cache: Path) -> dict[str, np.ndarray]:
    """The real clip's sound (48 kHz, from its first frame), landmarks and mouth, cached."""
    path = cache / "real" / f"{clip.name}.npz"
    if not path.exists():
        frames, pcm = read_clip(clip.path, clip.audio)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, pcm=pcm, landmarks=landmarks(frames))
    with np.load(path) as d:
        return {"pcm": d["pcm"], "landmarks": d["landmarks"], **mouth_measures(d["landmarks"])}


def open_over_shut(opening: np.ndarray, measure: np.ndarray) -> float:
    """A measure (lip thickness, mouth width) in the widest-open fifth of frames over the most shut fifth."""
    ok = np.isfinite(opening) & np.isfinite(measure)
    o, t = opening[ok], measure[ok]
    lo, hi = np.quantile(o, [SHARE, 1 - SHARE])
    return float(t[o >= hi].mean() / t[o <= lo].mean())


def clip_scores(ours: dict[str, np.ndarray], real: dict[str, np.ndarray]) -> dict:
    n = min(len(ours["opening"]), len(real["opening"]))
    o, r = ours["opening"][:n], real["opening"][:n]
    ok = np.isfinite(o) & np.isfinite(r)
    lags = {lag: lagged_corr(o, r, lag) for lag in range(-MAX_LAG, MAX_LAG + 1)}
    best = max(lags, key=lags.__getitem__)
    return {"corr": lags[0], "best_corr": lags[best], "best_lag": best, "lags": [round(v, 3) for v in lags.values()],
            "std_ratio": float(o[ok].std() / r[ok].std()),
            "p95_ratio": float(np.percentile(o[ok], 95) / np.percentile(r[ok], 95)),
            "p95": float(np.percentile(o[ok], 95)), "real_p95": float(np.percentile(r[ok], 95)),
            "thickness_ratio": open_over_shut(o, ours["thickness"][:n]),
            "real_thickness_ratio": open_over_shut(r, real["thickness"][:n]),
            "width_gain": open_over_shut(o, ours["width"][:n]), "real_width_gain": open_over_shut(r, real["width"][:n])}


def summary(rows: list[dict]) -> dict:
    """Each speaker weighs the same: clips are averaged per speaker, then speakers."""
    speakers = sorted({r["speaker"] for r in rows})
    per: dict[str, dict] = {}
    for s in speakers:
        mine = [r for r in rows if r["speaker"] == s]
        per[s] = {k: round(float(np.mean([r[k] for r in mine])), 3) for k in
                  ("corr", "best_corr", "std_ratio", "p95_ratio", "thickness_ratio", "real_thickness_ratio",
                   "width_gain", "real_width_gain")}
        per[s]["clips"] = len(mine)
        per[s]["open_vowel"] = _share([hit for r in mine for hit in r.get("open_vowels_reached", [])])
    mean = lambda k: round(float(np.mean([per[s][k] for s in speakers])), 3)  # noqa: E731
    median = lambda k: round(float(np.median([per[s][k] for s in speakers])), 3)  # noqa: E731
    peaks = np.array([(r["p95"], r["real_p95"]) for r in rows])
    vowels = [per[s]["open_vowel"] for s in speakers if np.isfinite(per[s]["open_vowel"])]
    return {"corr": mean("corr"), "best_corr": mean("best_corr"), "std_ratio_median": median("std_ratio"),
            "sources": by_source(rows, per),
            "p95_ratio_median": median("p95_ratio"), "thickness_ratio": mean("thickness_ratio"),
            "real_thickness_ratio": mean("real_thickness_ratio"), "width_gain": mean("width_gain"),
            "real_width_gain": mean("real_width_gain"),
            "std_ratio_range": [min(per[s]["std_ratio"] for s in speakers), max(per[s]["std_ratio"] for s in speakers)],
            "peak_corr": round(float(np.corrcoef(peaks.T)[0, 1]), 3) if peaks[:, 0].std() > 1e-6 else 0.0,
            "open_vowel_by_speaker": round(float(np.mean(vowels)), 3) if vowels else float("nan"), "speakers": per}


def by_source(rows: list[dict], per: dict[str, dict]) -> dict[str, dict]:
    """The per-speaker figures averaged over each source's speakers: the per-source table."""
    speakers: dict[str, set[str]] = {}
    for r in rows:
        speakers.setdefault(r["source"], set()).add(r["speaker"])
    return {src: {"speakers": len(ss), **{k: round(float(np.mean([per[s][k] for s in ss])), 3)
                                          for k in ("corr", "best_corr", "std_ratio", "p95_ratio")}}
            for src, ss in sorted(speakers.items())}


def phones(clip: HeldOut, pcm: np.ndarray) -> list:
    """The clip's phones, force-aligned to its words (known from its name, else heard by Whisper)."""
    from .evaluate import align
    from .real_eval import transcript

    words = (transcript(clip.name, clip.source, pcm) or "").split()
    # A clip cut mid-word ends before its transcript does, and the aligner then finds no
    # path through all the words: without the last word or two it does
    for drop in range(3):
        if len(words) - drop < 3:
            break
        if segments := align(pcm, " ".join(words[: len(words) - drop])):
            return segments
    return []


def opened_for(segments: list, real_opening: np.ndarray) -> list[bool]:
    """Per open vowel (as phone_scores counts them): did the real person's mouth open for it
    (reach OPENED of the clip's 95th-percentile opening)? Unstressed ones ("the", "a") often
    stay nearly shut: a mouth that follows the person should not open wide there."""
    peak = np.nanpercentile(real_opening, 95)
    return [bool(np.isfinite(r).any() and np.nanmax(r) >= OPENED * peak) for r in during_vowels(segments, real_opening)]


def shape_widths(segments: list, width: np.ndarray) -> dict[str, list[float]]:
    """Mouth width in the frames of each rounded and each spread sound, over the clip's median
    width: people's lips narrow for o/u/w and widen for ee/i/e, a mouth that only drops does neither."""
    from .visemes import frames_of, rounding_sign

    scale = np.nanmedian(width)
    out: dict[str, list[float]] = {"rounded": [], "spread": []}
    for s in segments:
        kind = {1: "rounded", -1: "spread"}.get(rounding_sign(s.viseme))
        if kind is None:
            continue
        frames = width[frames_of(s, len(width))] / scale
        if np.isfinite(frames).any():
            out[kind].append(float(np.nanmean(frames)))
    return out


def rounding(rows: list[dict], key: str) -> float:
    """Mean width of the rounded sounds over that of the spread ones, pooled over the clips: below 1
    where o/u/w read narrower than ee/i/e."""
    rounded = [w for r in rows for w in r[key]["rounded"]]
    spread = [w for r in rows for w in r[key]["spread"]]
    return round(float(np.mean(rounded) / np.mean(spread)), 4) if rounded and spread else float("nan")


def during_vowels(segments: list, opening: np.ndarray) -> list[np.ndarray]:
    """The opening in the frames of each open vowel that phone_scores counts."""
    from .evaluate import open_vowels
    from .visemes import frames_of

    return [opening[frames_of(s, len(opening))] for s in open_vowels(segments)]


def line_rise(meter) -> float:
    """How far past shut the open-vowel line opens our mouth, in eye distances: the default
    portrait drawn at jaw SHUT and at jaw OPEN (all else neutral), as mediapipe reads it."""
    from engine.core import motion

    from .evaluate import OPEN
    from .real_eval import JAW

    coeffs = motion.zeros(2)
    coeffs[:, JAW] = motion.SHUT, OPEN
    shut, wide = mouth_measures(landmarks(meter.frames(coeffs)))["opening"]
    return float(wide - shut)


def reached_line(segments: list, real_opening: np.ndarray, rise: float) -> list[bool]:
    """Per open vowel: did the real person's mouth open `rise` past its own shut (the clip's
    5th percentile), as far as the line asks of ours? The line applied to real people."""
    shut = np.nanpercentile(real_opening, 5)
    return [bool(np.isfinite(r).any() and np.nanmax(r) - shut >= rise) for r in during_vowels(segments, real_opening)]


NOISES = ("pink", "babble")


def noise_source(kind: str, rng: np.random.Generator) -> np.ndarray:
    """30 s of "pink" noise or "babble": 4 streams of 10 GRID s1 clips each, summed (their
    sound only: the pictures are not decoded)."""
    if kind not in NOISES:
        raise ValueError(f"noise is pink or babble, not {kind!r}")
    if kind == "pink":
        return coloured_noise(30 * SAMPLE_RATE, rng)
    clips = sorted((REAL_TALKING / "grid-s1").glob("*.mp4"))[-40:]
    sounds = [video_clip.sound(p) for p in clips]
    streams = [np.concatenate([s for s in sounds[k::4] if s is not None]).astype(np.float64) for k in range(4)]
    return sum(s[: min(map(len, streams))] for s in streams)


def judge(cache: Path, systems: tuple[str, ...], clips: list[HeldOut], log=print, weights: Path = WEIGHTS,
          noise: tuple[str, float] | None = None) -> dict:
    from .evaluate import jfk_set, phone_scores
    from .real_eval import JAW, MouthMeter, track

    rng = np.random.default_rng(0)
    kind, snr_db = noise or ("", 0.0)
    source = noise_source(kind, rng) if noise else None

    def noisy(pcm: np.ndarray) -> np.ndarray:
        return pcm if source is None else with_noise(pcm, source, snr_db, rng)

    meter = MouthMeter()
    rise = line_rise(meter)
    rows: dict[str, list[dict]] = {s: [] for s in systems}
    opened: list[bool] = []  # per open vowel, in the order of the rows: the person opened for it
    real_reached: dict[str, list[bool]] = {}  # per speaker: the person's mouth reached the line
    for clip in clips:
        real = real_measures(clip, cache)
        segments = phones(clip, real["pcm"])
        opened += opened_for(segments, real["opening"])
        real_reached.setdefault(clip.speaker, []).extend(reached_line(segments, real["opening"], rise))
        heard = noisy(real["pcm"])
        for system in systems:
            coeffs = track(system, heard, weights)
            ours = mouth_measures(landmarks(meter.frames(coeffs)))
            closed, reached = phone_scores(coeffs[:, JAW], segments)
            row = {"clip": clip.name, "speaker": clip.speaker, "source": clip.source, "closures_shut": closed,
                   "open_vowels_reached": reached, "shape": shape_widths(segments, ours["width"]),
                   "real_shape": shape_widths(segments, real["width"]), **clip_scores(ours, real)}
            rows[system].append(row)
            log(json.dumps({system: {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}}))
    jfk_pcm, jfk_segments = jfk_set()[0]
    jfk_pcm = noisy(jfk_pcm)
    by_speaker = [_share(hits) for hits in real_reached.values() if hits]
    out: dict = {"clips": len(clips), "real_open_vowel": {
        "line_rise": round(rise, 3), "pooled": _share([hit for hits in real_reached.values() for hit in hits]),
        "by_speaker": round(float(np.mean(by_speaker)), 3) if by_speaker else float("nan")}}
    for system in systems:
        closed = [hit for row in rows[system] for hit in row["closures_shut"]]
        reached = [hit for row in rows[system] for hit in row["open_vowels_reached"]]
        jfk_closed, jfk_opened = phone_scores(track(system, jfk_pcm, weights)[:, JAW], jfk_segments)
        theirs = [hit for hit, real in zip(reached, opened) if real]
        out[system] = summary(rows[system]) | {
            "closure": _share(closed), "closures": len(closed), "open_vowel": _share(reached),
            "open_vowels": len(reached), "open_vowel_they_opened": _share(theirs),
            "open_vowels_they_opened": len(theirs),
            "rounded_over_spread": rounding(rows[system], "shape"),
            "real_rounded_over_spread": rounding(rows[system], "real_shape"),
            "rounded_spread_sounds": [sum(len(r["shape"][k]) for r in rows[system]) for k in ("rounded", "spread")],
            "jfk_closure": _share(jfk_closed), "jfk_open_vowel": _share(jfk_opened)}
    return out


def _share(hits: list[bool]) -> float:
    return round(float(np.mean(hits)), 3) if hits else float("nan")


def mouth_crop(rgb: np.ndarray, lm: np.ndarray, tile: tuple[int, int] = (192, 128)) -> np.ndarray:
    """The mouth, 1.3 eye distances wide, from a full-size frame (lm: its 256-px landmarks)."""
    k = rgb.shape[1] / WIDTH
    centre, eye = (lm[13] + lm[14]) / 2 * k, float(np.linalg.norm(lm[263] - lm[33])) * k
    half_w, half_h = 0.65 * eye, 0.65 * eye * tile[1] / tile[0]
    x0, y0 = int(max(centre[0] - half_w, 0)), int(max(centre[1] - half_h, 0))
    crop = rgb[y0: int(centre[1] + half_h), x0: int(centre[0] + half_w)]
    return cv2.resize(crop, tile, interpolation=cv2.INTER_AREA)


def widest(opening: np.ndarray, n: int = 4, apart: int = 4) -> list[int]:
    picks: list[int] = []
    for i in np.argsort(-np.nan_to_num(opening, nan=-1)):
        if all(abs(int(i) - j) >= apart for j in picks):
            picks.append(int(i))
        if len(picks) == n:
            break
    return picks


def contact_sheet(out: Path, cache: Path, clips: list[HeldOut], weights: Path = WEIGHTS) -> dict:
    """Each portrait's four widest frames while saying a sentence full of p/b/m and open
    vowels, each beside the real held-out frame (one clip per speaker) whose opening is nearest
    (the real clips' landmarks from judge()'s cache: only their pictures are decoded again)."""
    from engine.batch.render import _text_audio

    from .evaluate import run_motion
    from .real_eval import CLOSED_MOUTH, SHEET_TEXT, MouthMeter

    pool: list[tuple[np.ndarray, np.ndarray, float]] = []  # (real frame, landmarks, opening)
    for clip in {c.speaker: c for c in clips}.values():
        frames, _ = read_clip(clip.path, clip.audio)
        measured = real_measures(clip, cache)
        lm, opening = measured["landmarks"], measured["opening"]
        pool += [(frames[i], lm[i], float(opening[i])) for i in range(0, len(frames), 2) if np.isfinite(opening[i])]
    pcm = np.concatenate(list(_text_audio(SHEET_TEXT)[0]))
    track = run_motion("dit", pcm, weights)[0]
    rows, seen = [], {}
    for portrait in (DEFAULT_AVATAR, CLOSED_MOUTH):
        frames = MouthMeter(portrait).frames(track)
        lm = landmarks(frames)
        opening = mouth_measures(lm)["opening"]
        tiles, picks = [], widest(opening)
        for i in picks:
            real = min(pool, key=lambda p: abs(p[2] - opening[i]))
            tiles += [mouth_crop(frames[i], lm[i]), mouth_crop(real[0], real[1])]
        rows.append(np.hstack(tiles))
        seen[portrait.stem] = [round(float(opening[i]), 3) for i in picks]
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), cv2.cvtColor(np.vstack(rows), cv2.COLOR_RGB2BGR))
    return {"sheet": str(out), "widest_openings": seen}


def noise_arg(text: str) -> tuple[str, float]:
    kind, _, snr = text.partition(":")
    try:
        if kind in NOISES:
            return kind, float(snr)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError("KIND:SNR, KIND pink or babble, SNR in dB (pink:20)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/judge"))
    parser.add_argument("--systems", nargs="+", default=["dit", "loudness"])
    parser.add_argument("--limit", type=int, default=None, help="clips per speaker (a quick run)")
    parser.add_argument("--speakers", nargs="+", default=None, help="only these held-out speakers")
    parser.add_argument("--split", choices=("legacy", *wild_set.SPLITS), default="legacy",
                        help="legacy: the held-out clips of ../shared/data; validation adds the wild set's "
                        "validation speakers; test: the wild set's test speakers (report only)")
    parser.add_argument("--wild", type=Path, default=wild_set.FOLDER, help="the gathered wild set")
    parser.add_argument("--sheet", type=Path, default=None, help="write the contact sheet (PNG) here")
    parser.add_argument("--weights", type=Path, default=WEIGHTS, help="MotionDiT weights (default: the committed ones)")
    parser.add_argument("--noise", type=noise_arg, default=None, metavar="KIND:SNR",
                        help="pink:20 or babble:20: that noise, so many dB under the speech, in what the systems hear")
    args = parser.parse_args()
    chosen = held_out() if args.split == "legacy" else clip_set(args.split, args.wild)
    clips = [c for c in chosen if args.speakers is None or c.speaker in args.speakers]
    if args.limit is not None:
        speakers = dict.fromkeys(c.speaker for c in clips)
        clips = [c for s in speakers for c in [c for c in clips if c.speaker == s][: args.limit]]
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731  (stdout: the result only)
    result = judge(args.out, tuple(args.systems), clips, progress, args.weights, args.noise)
    if args.sheet:
        result["sheet"] = contact_sheet(args.sheet, args.out, clips, args.weights)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
