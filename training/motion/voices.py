"""Offline voices that say where each phoneme is: piper (joe), espeak-ng, flite.

Each `say` returns 48 kHz float32 mono audio and viseme segments in seconds, from the
synthesiser's own alignment: piper's per-phoneme-id sample counts (its ONNX graph is
patched in memory to expose them), espeak-ng's phoneme events through its C API, and
flite's segment end times (`-psdur`).
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly

from engine.config import SAMPLE_RATE

from .visemes import Segment, from_arpabet, from_ipa, merge


@dataclass
class Utterance:
    audio: np.ndarray  # float32, 48 kHz
    segments: list[Segment]
    voice: str


def to_48k(audio: np.ndarray, rate: int) -> np.ndarray:
    g = np.gcd(rate, SAMPLE_RATE)
    return resample_poly(audio.astype(np.float32), SAMPLE_RATE // g, rate // g).astype(np.float32)


class Piper:
    """The bundled piper voice, in its own process (see piper_align.py); tempo and variability vary."""

    def say_many(self, texts: list[str], rng: np.random.Generator) -> list[Utterance]:
        requests = [{"text": t, "length_scale": rng.uniform(0.8, 1.3), "noise_scale": rng.uniform(0.4, 0.8),
                     "noise_w_scale": rng.uniform(0.5, 1.0)} for t in texts]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "piper.npz"
            subprocess.run([sys.executable, "-m", "training.motion.piper_align", str(out)],
                           input=json.dumps(requests), text=True, check=True)
            data = np.load(out)
            rate = int(data["rate"])
            return [self._utterance(data[f"audio{i}"], list(data[f"phonemes{i}"]), data[f"samples{i}"], rate)
                    for i in range(len(texts))]

    @staticmethod
    def _utterance(pcm: np.ndarray, phonemes: list[str], samples: np.ndarray, rate: int) -> Utterance:
        durations = [s / rate for s in samples]
        phonemes = [" " if p in ("<s>", "</s>") else p for p in phonemes]  # sentence edges: silence
        segments = _ipa_segments(phonemes, durations, 0.0)
        return Utterance(to_48k(pcm.astype(np.float32) / 32768, rate), merge(segments), "piper-joe")


def _ipa_segments(phonemes: list[str], durations: list[float], t: float) -> list[Segment]:
    """Stress marks give their time to the next phoneme, length marks to the previous one."""
    merged: list[list] = []
    carry = 0.0
    for p, d in zip(phonemes, durations):
        if p in "ˈˌ":
            carry += d
        elif p == "ː" and merged:
            merged[-1][1] += d
        else:
            merged.append([p, d + carry])
            carry = 0.0
    out = []
    for p, d in merged:
        out += from_ipa(p, t, t + d)
        t += d
    return out


class _EspeakEvent(ctypes.Structure):
    class _Id(ctypes.Union):
        _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]

    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _Id)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_EspeakEvent))
ESPEAK_VOICES = tuple(f"en-us+{v}" for v in ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4")) + (
    "en+m3", "en+f2", "en-us+klatt", "en-us+klatt4")
EVENT_PHONEME, RATE, PITCH, RANGE = 7, 1, 3, 4


class Espeak:
    """Debian's libespeak-ng, synchronous, with IPA phoneme events."""

    def __init__(self, voices: tuple[str, ...] = ESPEAK_VOICES) -> None:
        self.lib = ctypes.CDLL("libespeak-ng.so.1")
        self.rate = self.lib.espeak_Initialize(2, 0, None, 0x3)  # synchronous; phoneme events in IPA
        if self.rate <= 0:
            raise RuntimeError("espeak-ng did not initialise")
        self.voices = voices
        self._audio: list[np.ndarray] = []
        self._events: list[tuple[str, int]] = []
        self._callback = _CALLBACK(self._collect)  # kept referenced: C holds the pointer
        self.lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, wav, count, events) -> int:
        if count > 0:
            self._audio.append(np.ctypeslib.as_array(wav, (count,)).astype(np.float32) / 32768)
        i = 0
        while events[i].type != 0:
            if events[i].type == EVENT_PHONEME:
                self._events.append((events[i].id.string.decode("utf-8", "replace"), events[i].sample))
            i += 1
        return 0

    def say_many(self, texts: list[str], rng: np.random.Generator) -> list[Utterance]:
        """One voice for all of `texts`, drawn from the set; rate and pitch drawn per utterance."""
        voice = self.voices[rng.integers(len(self.voices))]
        return [self.say(t, voice, rng) for t in texts]

    def say(self, text: str, voice: str, rng: np.random.Generator) -> Utterance:
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:  # else it speaks in the last voice set
            raise ValueError(f"espeak-ng has no voice {voice!r}")
        self.lib.espeak_SetParameter(RATE, int(rng.uniform(130, 210)), 0)
        self.lib.espeak_SetParameter(PITCH, int(rng.uniform(25, 75)), 0)
        self.lib.espeak_SetParameter(RANGE, int(rng.uniform(30, 80)), 0)
        self._audio, self._events = [], []
        data = text.encode()
        self.lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, 0, None, None)
        audio = np.concatenate(self._audio) if self._audio else np.zeros(1, np.float32)
        ends = [s for _, s in self._events[1:]] + [len(audio)]
        segments = [Segment("sil", 0.0, self._events[0][1] / self.rate)] if self._events else []
        for (name, start), end in zip(self._events, ends):
            segments += from_ipa(name, start / self.rate, end / self.rate)
        return Utterance(to_48k(audio, self.rate), merge(segments), f"espeak-{voice}")


FLITE_TRAIN = ("kal", "awb", "rms")
FLITE_HELD_OUT = ("slt",)


class Flite:
    """Debian's flite binary; segment end times come from `-psdur`."""

    def __init__(self, voices: tuple[str, ...] = FLITE_TRAIN) -> None:
        self.voices = voices

    def say_many(self, texts: list[str], rng: np.random.Generator) -> list[Utterance]:
        voice = self.voices[rng.integers(len(self.voices))]
        return [self.say(t, voice, rng) for t in texts]

    def say(self, text: str, voice: str, rng: np.random.Generator) -> Utterance:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "say.wav"
            printed = subprocess.run(
                ["flite", "-voice", voice, "--setf", f"duration_stretch={rng.uniform(0.85, 1.25):.2f}",
                 "--setf", f"int_f0_target_mean={rng.uniform(80, 200):.0f}", "-psdur", "-t", text, "-o", str(out)],
                capture_output=True, text=True, check=True).stdout
            with wave.open(str(out)) as w:
                rate = w.getframerate()
                audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
        segments, start = [], 0.0
        for item in printed.split():
            phone, _, end = item.rpartition(":")
            segments += from_arpabet(phone, start, float(end))
            start = float(end)
        return Utterance(to_48k(audio, rate), merge(segments), f"flite-{voice}")
