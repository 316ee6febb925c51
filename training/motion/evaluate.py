"""Evaluate audio-to-motion on voices the model never heard, against the INTERIM module.

    python -m training.motion.evaluate --data .cache/motion-data

Both systems run exactly as a live session runs them (context + motion stages, audio in
two-frame chunks). Sets: the held-out flite voice (slt) from the recipe,
../shared/data/jfk.flac (real speech), aligned to its transcript by pocketsphinx, and
the same six sentences in English, French and German said by espeak-ng (espeak_en/fr/de:
people talk to the avatar in other languages; the model learned English only).
Figures, per set and system:
- closure: share of p/b/m whose frames include one with jaw_open <= 0.1 (lips shut);
- open_vowel: share of open vowels (aa ae ah ao, >= 60 ms) reaching jaw_open >= 0.25;
- loudness_corr: Pearson correlation of jaw_open with the frame's loudness (dB), per
  recording, averaged;
- reference_corr: the same with the reference jaw curve made from the phoneme timings
  (the training targets' recipe: visemes, coarticulation, emphasis);
- loudness_corr_ceiling_with_closure: loudness_corr of the loudness itself with one
  frame per p/b/m set to silence, the best a mouth that shuts for every p/b/m can score;
- boundary_jump: mean frame-to-frame motion change across chunk boundaries divided by
  the same within chunks (motion normalised per coefficient);
- realtime: audio seconds per second of one core for the two stages.
Prints JSON.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # "one core": no BLAS threads, set before numpy loads. Only when
    # run as a script: an import must not change the environment that later children inherit
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from engine.assembly import motion_stages  # noqa: E402
from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME  # noqa: E402
from engine.core import motion  # noqa: E402
from engine.core.pipeline import Pipeline  # noqa: E402
from engine.core.stream import motion_track  # noqa: E402
from engine.families.motion.delay import motion_delay_frames  # noqa: E402
from engine.families.motion.dit import WEIGHTS  # noqa: E402
from engine.families.motion.emphasis import frame_levels  # noqa: E402
from engine.families.motion.lip_closure import WEIGHTS as CLOSURE_WEIGHTS  # noqa: E402

from .visemes import OPEN_VOWELS, Segment, frames_of, from_arpabet, merge, mouth_curves  # noqa: E402

JFK = Path(__file__).resolve().parents[3] / "shared" / "data" / "jfk.flac"
JFK_TEXT = "and so my fellow americans ask not what your country can do for you ask what you can do for your country"
CLOSED, OPEN = motion.SHUT, 0.25
JAW = motion.INDEX["jaw_open"]
CHUNK = 2


def streamed_frames(pcm: np.ndarray) -> int:
    """Frames of a recording that whole two-frame chunks cover."""
    return len(pcm) // SAMPLES_PER_FRAME // CHUNK * CHUNK


def run_motion(kind: str, pcm: np.ndarray, weights: Path = WEIGHTS, seed: int = 0,
               closure: Path | None = CLOSURE_WEIGHTS) -> tuple[np.ndarray, float]:
    """(frames, DIM) motion of a whole recording as a live session streams it
    (engine.core.stream.motion_track), and the CPU seconds it took."""
    started = time.process_time()
    track = motion_track(Pipeline(motion_stages(kind, weights, closure)), pcm, motion_delay_frames(kind, weights),
                         seed, CHUNK)
    return track, time.process_time() - started


def boundary_jump(track: np.ndarray, scale: np.ndarray) -> float:
    steps = np.linalg.norm(np.diff(track / scale, axis=0), axis=1)  # steps[i]: frame i -> i+1
    at_boundary = (np.arange(1, len(track)) % CHUNK) == 0
    return float(steps[at_boundary].mean() / max(steps[~at_boundary].mean(), 1e-9))


def reference_jaw(segments: list[Segment], pcm: np.ndarray, frames: int) -> np.ndarray:
    from .recipe import jaw_target  # the recipe pulls in the voices; evaluation alone need not

    return jaw_target(mouth_curves(segments, frames)[:, JAW], pcm, frames)


def loudness_ceiling(items: list[tuple[np.ndarray, list[Segment]]]) -> float:
    """The loudness correlation of the loudness itself with one frame per p/b/m shut.

    A jaw that shuts for every p/b/m can at best copy the loudness everywhere else and
    go to silence once per p/b/m, in its quietest frame: this is that track's score.
    """
    corr = []
    for pcm, segments in items:
        loud = frame_levels(pcm, streamed_frames(pcm))
        track = loud.copy()
        for s in segments:
            if s.viseme == "BMP":
                near = frames_of(s, len(loud))
                track[near[np.argmin(loud[near])]] = loud.min()
        corr.append(np.corrcoef(track, loud)[0, 1])
    return round(float(np.mean(corr)), 3)


def score(items: list[tuple[np.ndarray, list[Segment], np.ndarray]], scale: np.ndarray) -> dict:
    closed, opened, jumps, loud_corr, ref_corr = [], [], [], [], []
    for track, segments, pcm in items:
        shut, opens = phone_scores(track[:, JAW], segments)
        closed += shut
        opened += opens
        jumps.append(boundary_jump(track, scale))
        loud_corr.append(np.corrcoef(track[:, JAW], frame_levels(pcm, len(track)))[0, 1])
        ref_corr.append(np.corrcoef(track[:, JAW], reference_jaw(segments, pcm, len(track)))[0, 1])
    mean = lambda values: round(float(np.mean(values)), 3)  # noqa: E731
    return {"closure": mean(closed), "closures": len(closed), "open_vowel": mean(opened), "open_vowels": len(opened),
            "loudness_corr": mean(loud_corr), "reference_corr": mean(ref_corr), "boundary_jump": mean(jumps)}


def heldout_set(data: Path, limit: int) -> list[tuple[np.ndarray, list[Segment]]]:
    d = np.load(data / "heldout.npz")
    names, starts = list(d["visemes"]), d["pcm_starts"]
    out = []
    for i in range(min(limit, len(starts) - 1)):
        rows = d["segments"][d["segments"][:, 0] == i]
        out.append((d["pcm"][starts[i]:starts[i + 1]], [Segment(names[int(v)], a, b) for _, v, a, b in rows]))
    return out


def open_vowels(segments: list[Segment]) -> list[Segment]:
    """The open vowels long enough to judge (>= 60 ms)."""
    return [s for s in segments if s.viseme in OPEN_VOWELS and s.end - s.start >= 0.06]


def phone_scores(jaw: np.ndarray, segments: list[Segment]) -> tuple[list[bool], list[bool]]:
    """Per p/b/m: has a shut frame; per open vowel of >= 60 ms: reaches OPEN."""
    closed = [bool(jaw[frames_of(s, len(jaw))].min() <= CLOSED) for s in segments if s.viseme == "BMP"]
    opened = [bool(jaw[frames_of(s, len(jaw))].max() >= OPEN) for s in open_vowels(segments)]
    return closed, opened


def align(pcm48: np.ndarray, text: str) -> list[Segment]:
    """Phone segments of `text` force-aligned to 48 kHz audio by pocketsphinx ([] if it fails)."""
    from pocketsphinx import Decoder

    pcm16 = pcm48[: len(pcm48) // 3 * 3].reshape(-1, 3).mean(1).astype(np.int16)
    decoder = Decoder(samprate=16000, bestpath=False, loglevel="ERROR")
    try:
        decoder.set_align_text(text)
        # The first pass finds the words; set_alignment() then turns them into a phone
        # network that the second pass aligns. Calling it again after the second pass
        # would replace the phone timings with word spans.
        for second in (False, True):
            decoder.start_utt()
            decoder.process_raw(pcm16.tobytes(), full_utt=True)
            decoder.end_utt()
            if not second:
                decoder.set_alignment()
        return merge([s for word in decoder.get_alignment() for p in word
                      for s in from_arpabet(p.name, p.start / 100, (p.start + p.duration) / 100)])
    except (RuntimeError, KeyError, ValueError):
        return []


# The same meaning in each language, full of p/b/m and open vowels.
SENTENCES = {
    "en": ("My father bought a big map of Paris last summer.",
           "Please pass me the apple pie and a cup of black coffee.",
           "Bob and Pam walked home by the harbour at nightfall.",
           "The market was open, but the bakery had sold out of bread.",
           "Many people have asked what the budget means for families.",
           "A man in a brown jacket was waiting for the bus at the station."),
    "fr": ("Mon père a acheté une grande carte de Paris l'été passé.",
           "Passe-moi la tarte aux pommes et un café noir, s'il te plaît.",
           "Bob et Pam sont rentrés à pied par le port à la tombée de la nuit.",
           "Le marché était ouvert, mais la boulangerie n'avait plus de pain.",
           "Beaucoup de gens ont demandé ce que le budget change pour les familles.",
           "Un homme en veste marron attendait le bus à la gare."),
    "de": ("Mein Vater hat letzten Sommer eine große Karte von Paris gekauft.",
           "Bitte gib mir den Apfelkuchen und einen Becher schwarzen Kaffee.",
           "Bob und Pam gingen bei Abend am Hafen entlang nach Hause.",
           "Der Markt war offen, aber die Bäckerei hatte kein Brot mehr.",
           "Viele Menschen haben gefragt, was der Haushalt für Familien bedeutet.",
           "Ein Mann in brauner Jacke wartete am Bahnhof auf den Bus."),
}
ESPEAK_LANGUAGE = {"en": "en-us", "fr": "fr", "de": "de"}
PAD_S = 0.4  # silence either side, as a turn has


def language_set(language: str, voices: tuple[str, ...] = ("m3", "f2"), limit: int = 6,
                 ) -> list[tuple[np.ndarray, list[Segment]]]:
    """SENTENCES[language] said by espeak-ng's voice variants, as int16 48 kHz with its own
    phoneme timings (French and German phonemes map to the nearest English viseme; those with
    none, such as the uvular r, count as silence). espeak-ng's English voices are in the
    training recipe, its French and German are not."""
    from .voices import Espeak  # the synthesiser's C library: loaded only when asked for

    espeak, rng, out = Espeak(), np.random.default_rng(0), []
    pad = np.zeros(round(PAD_S * SAMPLE_RATE), np.float32)
    for voice in voices:
        for text in SENTENCES[language][:limit]:
            said = espeak.say(text, f"{ESPEAK_LANGUAGE[language]}+{voice}", rng)
            pcm = np.clip(np.concatenate([pad, said.audio, pad]) * 32767, -32768, 32767).astype(np.int16)
            out.append((pcm, [Segment(s.viseme, s.start + PAD_S, s.end + PAD_S) for s in said.segments]))
    return out


def jfk_set() -> list[tuple[np.ndarray, list[Segment]]]:
    """jfk.flac at 48 kHz and its phones, force-aligned to the transcript."""
    from engine.batch.render import audio_stream

    blocks, _ = audio_stream(JFK)
    pcm48 = np.concatenate(list(blocks))
    return [(pcm48, align(pcm48, JFK_TEXT))]


def evaluate(data: Path, weights: Path = WEIGHTS, limit: int = 1000,
             kinds: tuple[str, ...] = ("dit", "interim")) -> dict:
    sets = {"heldout_flite_slt": heldout_set(data, limit), "jfk": jfk_set(),
            **{f"espeak_{lang}": language_set(lang, limit=limit) for lang in SENTENCES}}
    result = {}
    for kind in kinds:
        result[kind] = {}
        audio_s = cpu_s = 0.0
        for name, items in sets.items():
            runs = [(run_motion(kind, pcm, weights), segments, pcm) for pcm, segments in items]
            cpu_s += sum(r[0][1] for r in runs)
            audio_s += sum(len(pcm) / SAMPLES_PER_FRAME / FPS for pcm, _ in items)
            tracks = [(track, segments, pcm) for (track, _), segments, pcm in runs]
            scale = np.concatenate([t for t, _, _ in tracks]).std(0) + 1e-3
            result[kind][name] = score(tracks, scale)
        result[kind]["realtime"] = round(audio_s / cpu_s, 1)
    result["loudness_corr_ceiling_with_closure"] = {name: loudness_ceiling(items) for name, items in sets.items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(".cache/motion-data"))
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--limit", type=int, default=1000, help="held-out sequences to use")
    args = parser.parse_args()
    print(json.dumps(evaluate(args.data, args.weights, args.limit), indent=1))


if __name__ == "__main__":
    main()
