# SPDX-License-Identifier: GPL-3.0-or-later
"""Piper with phoneme alignments, run as its own process (piper-tts is GPL-3.0).

Reads a JSON list of {"text", "length_scale", "noise_scale", "noise_w_scale"} on stdin
and writes one .npz: per utterance its 22.05 kHz int16 audio, its phonemes and each
phoneme's duration in samples. The ONNX graph is patched in memory to expose the
per-phoneme-id sample counts (needs the `onnx` package) and to seed its noise, so
the same requests give the same audio.

    python -m training.motion.piper_align OUT.npz < requests.json
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime
from piper import PiperVoice, SynthesisConfig
from piper.patch_voice_with_alignment import add_alignment_output

from speech.tts import default_voice


def align(voice: PiperVoice, request: dict) -> tuple[np.ndarray, list[str], list[int]]:
    config = SynthesisConfig(length_scale=request["length_scale"], noise_scale=request["noise_scale"],
                             noise_w_scale=request["noise_w_scale"], normalize_audio=False)
    audio_parts, phonemes, samples = [], [], []
    for sentence in voice.phonemize(request["text"]):
        ids = voice.phonemes_to_ids(sentence)
        audio, counts = voice.phoneme_ids_to_audio(ids, config, include_alignments=True)
        # ids are BOS PAD (phoneme PAD)* EOS; a phoneme owns its id and the PAD after it
        phonemes += ["<s>"] + sentence + ["</s>"]
        samples += [int(counts[0] + counts[1])]
        samples += [int(counts[2 + 2 * i] + counts[3 + 2 * i]) for i in range(len(sentence))]
        samples += [int(counts[-1])]
        audio_parts.append(np.asarray(audio, np.float32).reshape(-1))
    pcm = np.clip(np.concatenate(audio_parts) * 32767, -32768, 32767).astype(np.int16)
    return pcm, phonemes, samples


SEED = 0.0


def seeded_voice() -> PiperVoice:
    """The voice with alignments and a fixed seed for its noise, so the same requests give the same audio."""
    voice = PiperVoice.load(str(default_voice()))
    model = onnx.load(str(default_voice()))
    add_alignment_output(model)
    for node in model.graph.node:
        if node.op_type == "RandomNormalLike":
            node.attribute.append(onnx.helper.make_attribute("seed", SEED))
    voice.session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return voice


def main() -> None:
    voice = seeded_voice()
    out = {"rate": np.array(voice.config.sample_rate)}
    for i, request in enumerate(json.load(sys.stdin)):
        pcm, phonemes, samples = align(voice, request)
        out[f"audio{i}"], out[f"phonemes{i}"], out[f"samples{i}"] = pcm, np.array(phonemes), np.array(samples)
    np.savez(sys.argv[1], **out)


if __name__ == "__main__":
    main()
