"""Batch render speed and memory: render time / audio time, and peak RSS of a long input vs a
short one (they should match: memory must not grow with duration). Prints JSON.

Input: ../shared/data/jfk.flac looped to each length. Baseline, same run: writing the same
MP4 (H.264 + AAC) from the unchanged portrait, without the avatar pipeline.

    .venv/bin/python bench/render.py [--minutes 1 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testkit.audio import write_wav  # noqa: E402
from testkit.server import ARTIFACTS, SHARED_DATA  # noqa: E402


def looped_wav(minutes: float) -> Path:
    from engine.batch.render import audio_stream

    blocks, _ = audio_stream(SHARED_DATA / "jfk.flac")
    speech = np.concatenate(list(blocks))
    total = int(minutes * 60 * 48000)
    pcm = np.tile(speech, total // len(speech) + 1)[:total]
    return write_wav(ARTIFACTS / f"speech-{minutes:g}min.wav", pcm)


def run_measured(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of a command and its child processes together, polled every 50 ms."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [ps, *ps.children(recursive=True)]))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.read().decode()[-500:])
    return time.monotonic() - started, peak / 2**20


BASELINE = """
import sys, numpy as np, cv2
from pathlib import Path
from engine.families.portrait.avatar import DEFAULT_AVATAR, load_portrait
from engine.batch.render import Mp4Writer, audio_stream, chunks
from engine.core.stage import FrameChunk
frame = cv2.cvtColor(load_portrait(DEFAULT_AVATAR).image, cv2.COLOR_RGB2YUV_I420)
writer, n = Mp4Writer(Path(sys.argv[2]), 512), 0
for pcm in chunks(audio_stream(Path(sys.argv[1]))[0], 3840, 3840):
    writer.write(FrameChunk(n, np.stack([frame, frame]), None), pcm)
    n += 2
writer.close()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, nargs="+", default=[1.0, 10.0])
    args = parser.parse_args()
    report = {}
    for minutes in args.minutes:
        wav = looped_wav(minutes)
        seconds, peak = run_measured([sys.executable, "-m", "engine.batch.render", "--audio", str(wav),
                                      "--out", str(ARTIFACTS / "bench-render.mp4")])
        base_s, base_peak = run_measured([sys.executable, "-c", BASELINE, str(wav), str(ARTIFACTS / "bench-base.mp4")])
        report[f"{minutes:g}min"] = {
            "render_time_over_audio_time": round(seconds / (minutes * 60), 3),
            "peak_rss_mb": round(peak, 1),
            "baseline_mp4_only_time_over_audio_time": round(base_s / (minutes * 60), 3),
            "baseline_peak_rss_mb": round(base_peak, 1),
        }
        wav.unlink()
    keys = list(report)
    if len(keys) > 1:
        longest, shortest = report[keys[-1]]["peak_rss_mb"], report[keys[0]]["peak_rss_mb"]
        report["peak_rss_longest_over_shortest"] = round(longest / shortest, 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
