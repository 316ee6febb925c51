"""Does a voice tell how wide its speaker opens the mouth? Per-clip voice measures against
the real 95th-percentile opening, on the judge's held-out clips.

    python -m training.motion.peak_probe --cache .cache/judge   # the judge's cache of the real clips

Prints (JSON) each measure's correlation with the real peak across all clips and within each
speaker group. Within the GRID samples (ten people, one room, one microphone, the same kind
of sentence) a measure that tracks articulation should show up; across sources a measure
may only be telling the recordings apart (their gain and channel), which a user's
microphone would not repeat.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.signal as ss

from engine.config import SAMPLES_PER_FRAME
from engine.families.motion.emphasis import frame_db
from engine.families.motion.liveliness import Liveliness, spread

from .judge import held_out, real_measures

RATE = 16_000
FRAME_S = 0.04


def voice_measures(pcm48: np.ndarray) -> dict[str, float]:
    rms = frame_db(pcm48, len(pcm48) // SAMPLES_PER_FRAME)
    voiced = rms > rms.max() - 30
    x = ss.resample_poly(pcm48.astype(np.float32), 1, 3)
    f, _, spec = ss.stft(x, RATE, nperseg=512, noverlap=512 - 160)
    power = np.abs(spec) ** 2
    energy = 10 * np.log10(power.sum(0) + 1e-12)
    speech = energy > energy.max() - 30
    band = lambda lo, hi: power[(f >= lo) & (f < hi)].sum(0) + 1e-12  # noqa: E731
    centroid = (f[:, None] * power).sum(0) / (power.sum(0) + 1e-12)
    syllables = len(ss.find_peaks(rms, prominence=6)[0])
    lively = Liveliness()  # the engine's own pitch tracker and range (liveliness.py)
    pitch = lively.hear(pcm48, lively.new_state())
    return {
        "level_db": float(np.percentile(rms, 95)),
        "level_range_db": float(np.percentile(rms[voiced], 95) - np.percentile(rms[voiced], 20)),
        "centroid_hz": float(np.median(centroid[speech])),
        "f1_band_db": float(np.median(10 * np.log10(band(500, 1000) / band(100, 500))[speech])),
        "tilt_db": float(np.median(10 * np.log10(band(1000, 4000) / band(100, 1000))[speech])),
        "syllables_per_s": syllables / (voiced.sum() * FRAME_S + 1e-6),
        "level_change_db": float(np.std(np.diff(rms[voiced]))),
        "f0_range_st": spread(12 * np.log2(pitch[np.isfinite(pitch)] / 100), np.empty(0)),
    }


def probe(cache: Path) -> dict:
    rows: list[dict[str, Any]] = []
    for clip in held_out():
        real = real_measures(clip, cache)  # tracked once, cached by the judge
        pcm, opening = real["pcm"], real["opening"]
        peak = float(np.percentile(opening[np.isfinite(opening)], 95))
        rows.append({"speaker": clip.speaker, "real_p95": peak, **voice_measures(pcm)})
    names = [k for k in rows[0] if k not in ("speaker", "real_p95")]

    def corr(group: list[dict]) -> dict[str, float]:
        real = [r["real_p95"] for r in group]
        return {k: round(float(np.corrcoef([r[k] for r in group], real)[0, 1]), 2) for k in names}

    groups = {s: [r for r in rows if r["speaker"] == s] for s in dict.fromkeys(r["speaker"] for r in rows)}
    return {"clips": len(rows), "all": corr(rows),
            **{s: corr(g) for s, g in groups.items() if len(g) >= 5},
            "real_p95": {s: [round(r["real_p95"], 3) for r in g] for s, g in groups.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".cache/judge"))
    print(json.dumps(probe(parser.parse_args().cache), indent=1))


if __name__ == "__main__":
    main()
