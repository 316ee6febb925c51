"""The lip-sync judge (training/motion/judge.py): its figures, and the script end to end."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.config import SAMPLE_RATE
from engine.core import motion
from engine.families.portrait.avatar import DEFAULT_AVATAR, cache_path
from engine.families.portrait.rig import FaceRig
from training.motion.judge import (
    clip_scores,
    held_out,
    noise_arg,
    noise_source,
    reached_line,
    rounding,
    shape_widths,
    summary,
)
from training.motion.visemes import Segment

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def syllables(frames: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.convolve(rng.random(frames) ** 3, np.hanning(7), "same") / 3


def test_a_late_mouth_is_found_at_its_lag_and_a_wide_one_in_its_ratios():
    real = syllables()
    ours = 2 * np.concatenate([np.zeros(2), real[:-2]])  # two frames late, twice as wide
    thick, wide = np.full_like(real, 0.2), np.full_like(real, 0.9)
    scores = clip_scores({"opening": ours, "thickness": thick, "width": wide * (1 + ours)},
                         {"opening": real, "thickness": thick * (1 + real), "width": wide})
    assert scores["best_lag"] == -2 and scores["best_corr"] > 0.99
    assert scores["corr"] < 0.8
    assert scores["std_ratio"] == pytest.approx(2, rel=0.05) and scores["p95_ratio"] == pytest.approx(2, rel=0.05)
    assert scores["thickness_ratio"] == pytest.approx(1.0) and scores["real_thickness_ratio"] > 1.05
    assert scores["width_gain"] > 1.05 and scores["real_width_gain"] == pytest.approx(1.0)  # ours widens, theirs not


def test_rounding_is_the_width_of_o_u_w_over_that_of_ee_i_e_in_each_clips_own_scale():
    segments = [Segment("UW", 0.0, 0.36), Segment("AA", 0.44, 0.76), Segment("IY", 0.84, 1.16),
                Segment("W", 1.64, 1.96)]
    width = np.repeat([0.9, 1.0, 1.1, 1.0, 0.9], 10)  # 10 frames of 40 ms each: narrow, neither, wide, -, narrow
    rows = [{"shape": shape_widths(segments, 2 * width)}, {"shape": shape_widths(segments, width)}]
    assert rows[0]["shape"] == rows[1]["shape"], "in the clip's own scale: a larger face reads the same"
    assert len(rows[0]["shape"]["rounded"]) == 2 and len(rows[0]["shape"]["spread"]) == 1
    assert rounding(rows, "shape") == pytest.approx(0.9 / 1.1, abs=1e-3)
    assert np.isnan(rounding([{"shape": {"rounded": [1.0], "spread": []}}], "shape"))


def test_every_speaker_weighs_the_same_however_many_clips_they_have():
    row = {"best_corr": 0, "std_ratio": 1, "p95_ratio": 1, "thickness_ratio": 1, "real_thickness_ratio": 1,
           "width_gain": 1, "real_width_gain": 1}
    rows = [dict(row, speaker="many", source="talks", corr=0.9, p95=0.2 + i / 100, real_p95=0.1 + i / 100,
                 open_vowels_reached=[True] * 3) for i in range(10)]
    rows.append(dict(row, speaker="one", source="talks", corr=0.1, p95=0.3, real_p95=0.3, open_vowels_reached=[False]))
    rows.append(dict(row, speaker="none", source="actors", corr=0.5, p95=0.3, real_p95=0.3, open_vowels_reached=[]))
    result = summary(rows)
    assert result["corr"] == pytest.approx(0.5)
    assert result["sources"]["talks"]["speakers"] == 2 and result["sources"]["talks"]["corr"] == pytest.approx(0.5)
    assert result["speakers"]["many"]["clips"] == 10 and result["peak_corr"] > 0.5
    # 30 of 31 open vowels pooled, but one speaker all and one none: a half (the third had none to judge)
    assert result["open_vowel_by_speaker"] == pytest.approx(0.5)


def test_the_held_out_set_has_four_speakers_from_three_sources_and_none_trained_on():
    clips = held_out()
    assert {c.speaker for c in clips} == {"grid-other", "crema-1001", "obama", "reagan"}
    assert len({c.source for c in clips}) >= 3
    assert not any("grid-s1" in str(c.path) for c in clips)


def test_lips_get_thicker_as_they_part():
    rig = FaceRig(np.load(cache_path(DEFAULT_AVATAR))[:468].astype(np.float32))

    def heights(jaw: float) -> tuple[float, float]:
        coeffs = motion.zeros(1)[0]
        coeffs[motion.INDEX["jaw_open"]] = jaw
        y = (rig.points + rig.displacement(coeffs)) @ rig.frame.down
        return y[rig.index[13]] - y[rig.index[0]], y[rig.index[17]] - y[rig.index[14]]

    # from 0.4 on, the closure of the shut lips is fully released: what is left is the swell
    (upper_part, lower_part), (upper_wide, lower_wide) = heights(0.4), heights(0.8)
    assert lower_wide > 1.05 * lower_part, "the lower lip thickens"
    assert upper_wide > 1.05 * upper_part, "the upper lip thickens"


def test_the_judge_runs_end_to_end_on_a_few_real_clips(tmp_path):
    out = subprocess.run([sys.executable, "-m", "training.motion.judge", "--out", str(tmp_path), "--limit", "1",
                          "--speakers", "grid-other", "crema-1001", "--systems", "dit", "loudness"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["clips"] == 2
    for system in ("dit", "loudness"):
        assert set(result[system]["speakers"]) == {"grid-other", "crema-1001"}
        assert -1 <= result[system]["corr"] <= result[system]["best_corr"] <= 1
    assert result["dit"]["corr"] > result["loudness"]["corr"], "the model follows real mouths better than loudness"
    dit = result["dit"]
    assert dit["closures"] > 0 and 0 < dit["open_vowels_they_opened"] <= dit["open_vowels"]
    real = result["real_open_vowel"]
    assert 0.03 < real["line_rise"] < 0.15, "jaw 0.25 opens the drawn mouth a little past shut"
    assert 0 <= real["pooled"] <= 1


def test_the_open_vowel_line_asks_of_real_people_what_it_asks_of_ours():
    opening = np.full(50, 0.02)  # shut at 0.02 eye distances, 25 fps
    opening[10:13], opening[30:33] = 0.09, 0.05  # a wide "a" and a half-open one
    vowels = [Segment("AA", 0.4, 0.52), Segment("AH", 1.2, 1.32), Segment("B", 1.6, 1.7), Segment("AE", 1.8, 1.83)]
    # the consonant and the 30 ms vowel are not counted, as the line itself counts them
    assert reached_line(vowels, opening, rise=0.06) == [True, False]
    assert reached_line(vowels, opening, rise=0.02) == [True, True]


def test_whispers_digits_become_the_words_said_for_the_aligner():
    from training.motion.real_eval import spoken_number

    assert [spoken_number(20, ordinal=True), spoken_number(50), spoken_number(11)] == ["twentieth", "fifty", "eleven"]
    assert [spoken_number(21, ordinal=True), spoken_number(3, ordinal=True), spoken_number(12, ordinal=True)] == [
        "twenty first", "third", "twelfth"]
    assert spoken_number(342) == "three hundred forty two" and spoken_number(2010) == "two thousand ten"


def test_the_judges_noises_are_pink_or_real_babble_and_anything_else_is_refused():
    assert noise_arg("pink:20") == ("pink", 20.0) and noise_arg("babble:-5") == ("babble", -5.0)
    for bad in ("pink", "x:3", "pink:abc"):
        with pytest.raises(argparse.ArgumentTypeError):
            noise_arg(bad)
    with pytest.raises(ValueError):
        noise_source("hum", np.random.default_rng(0))
    babble = noise_source("babble", np.random.default_rng(0))
    assert len(babble) > 25 * SAMPLE_RATE  # four voices of 10 clips each, 3 s a clip
    frames = babble[: len(babble) // 1920 * 1920].reshape(-1, 1920)
    level = 20 * np.log10(np.sqrt((frames**2).mean(1)) + 1e-9)
    assert (level > np.percentile(level, 90) - 20).mean() > 0.7  # four talkers: mostly someone talking (0.78)
