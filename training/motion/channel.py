"""What real recordings do to a voice: sample rate, telephone band, lossy codecs, level, noise, room.

`degrade` draws one such channel per call. Training passes real speech through it so the
motion model's features survive 8-48 kHz input, MP3 and Opus, quiet and loud
microphones; the evaluation uses `coded` to test on coded versions of real speech, and the
judge `with_noise` to test in a noisy room.
Codecs add delay (encoder priming, Opus pre-skip): the result is realigned to the
input by cross-correlation so frame k still carries the audio of frame k.
"""

from __future__ import annotations

import io

import av
import numpy as np
from scipy.signal import butter, resample_poly, sosfilt

from engine.config import SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.families.motion.emphasis import frame_db

from .recipe import reverb

RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100)
CODECS = {"mp3": ("mp3", "libmp3lame", (32_000, 64_000, 128_000)), "opus": ("ogg", "libopus", (12_000, 24_000, 48_000))}


def band_limit(x: np.ndarray, rate: int) -> np.ndarray:
    """Down to `rate` and back to 48 kHz (what a low-rate microphone or file keeps)."""
    g = np.gcd(rate, SAMPLE_RATE)
    low = resample_poly(x, rate // g, SAMPLE_RATE // g)
    return resample_poly(low, SAMPLE_RATE // g, rate // g)[: len(x)]


def telephone(x: np.ndarray) -> np.ndarray:
    sos = butter(4, [300, 3400], "bandpass", fs=SAMPLE_RATE, output="sos")
    return sosfilt(sos, x)


def coded(x: np.ndarray, codec: str, bitrate: int) -> np.ndarray:
    """A round trip through `codec` ("mp3" or "opus") at `bitrate`, realigned to the input."""
    fmt, name, _ = CODECS[codec]
    pcm = np.clip(x * 32767, -32768, 32767).astype(np.int16)
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(name, rate=SAMPLE_RATE, layout="mono")
        stream.bit_rate = bitrate
        frame = av.AudioFrame.from_ndarray(pcm[None], format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    buf.seek(0)
    resampler = av.AudioResampler("s16", "mono", SAMPLE_RATE)
    with av.open(buf) as inp:
        blocks = [o.to_ndarray().reshape(-1) for f in inp.decode(audio=0) for o in resampler.resample(f)]
    y = np.concatenate(blocks).astype(np.float32) / 32768 if blocks else np.zeros(0, np.float32)
    return realign(y, x)


def realign(y: np.ndarray, x: np.ndarray, max_shift: int = 4800) -> np.ndarray:
    """`y` shifted so it lines up with `x` (within +-100 ms) and cut or padded to its length."""
    n = len(x) + len(y)
    size = 1 << (n - 1).bit_length()
    corr = np.fft.irfft(np.fft.rfft(y, size) * np.conj(np.fft.rfft(x, size)), size)
    lags = np.concatenate([corr[: max_shift + 1], corr[-max_shift:]])
    shift = int(np.argmax(lags))
    shift = shift if shift <= max_shift else shift - len(lags)  # y lags x by `shift` samples
    y = y[shift:] if shift >= 0 else np.concatenate([np.zeros(-shift, y.dtype), y])
    return np.pad(y, (0, max(0, len(x) - len(y))))[: len(x)]


def degrade(pcm: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random channel: int16 48 kHz in, int16 48 kHz out, same length and timing."""
    x = pcm.astype(np.float32) / 32768
    if rng.random() < 0.5:
        x = band_limit(x, int(rng.choice(RATES)))
    if rng.random() < 0.2:
        x = telephone(x)
    if rng.random() < 0.25:
        x = reverb(x.astype(np.float32), rng)
    x = x / (np.abs(x).max() + 1e-9) * 10 ** (rng.uniform(-30, -1) / 20)
    noise = rng.standard_normal(len(x)) * 10 ** (rng.uniform(-80, -38) / 20)
    x = x + noise
    if rng.random() < 0.4:
        codec = str(rng.choice(list(CODECS)))
        x = coded(x, codec, int(rng.choice(CODECS[codec][2])))
    return np.clip(x * 32767, -32768, 32767).astype(np.int16)


def coloured_noise(samples: int, rng: np.random.Generator, slope: float = 1.0) -> np.ndarray:
    """Noise whose power falls as 1 / f ** slope, RMS 1: 0 is a hiss, 1 (pink) the same power in
    every octave (fans, traffic, a room's rumble), 2 a rumble."""
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    spectrum[1:] /= np.arange(1, len(spectrum)) ** (slope / 2)
    spectrum[0] = 0
    x = np.fft.irfft(spectrum, samples)
    return x / np.sqrt(np.mean(x**2))


def speech_rms(pcm: np.ndarray) -> float:
    """The RMS (int16 units) of the louder half of a recording's 40 ms frames: its speech, not
    its pauses."""
    db = frame_db(pcm, len(pcm) // SAMPLES_PER_FRAME)
    return 32768 * float(np.sqrt(np.mean(10 ** (db[db >= np.median(db)] / 10))))


def with_noise(pcm: np.ndarray, noise: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """int16 `pcm` with a random stretch of `noise` (repeated if short) added `snr_db` under its
    speech (speech_rms)."""
    start = int(rng.integers(len(noise)))
    stretch = np.resize(np.roll(noise, -start), len(pcm)).astype(np.float64)
    stretch *= speech_rms(pcm) / (np.sqrt(np.mean(stretch**2)) + 1e-9) / 10 ** (snr_db / 20)
    return np.clip(pcm + stretch, -32768, 32767).astype(np.int16)
