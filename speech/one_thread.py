"""A copy of a piper voice that onnxruntime runs on one thread.

piper's command line gives onnxruntime no session options, so every sentence runs on a
pool of one thread per core whose threads spin while they wait for each other. On 2 cores
that is fastest only while both are idle (a 4-word piece in 59 ms, one thread 93 ms). With
one core busy, as it is whenever a session renders beside it, the pool's thread on that
core straggles: 180 ms for the same piece and 0.9-1.1 s for a 25-word sentence, against
94-101 ms and 0.61-0.62 s on one thread, which also spends 0.6-0.7x the CPU time
(2026-12-05, a busy loop pinned to either core).

onnxruntime reads session options stored in the model itself (the metadata entry
`ort_config`) when ORT_LOAD_CONFIG_FROM_MODEL=1. A protobuf message is extended by
appending fields, so the copy is the voice's bytes plus one `metadata_props` entry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ORT_ENV = {"ORT_LOAD_CONFIG_FROM_MODEL": "1"}
ONE_THREAD = {"session_options": {"intra_op_num_threads": 1}}
METADATA_PROPS = 14  # ModelProto.metadata_props, a StringStringEntryProto (key: 1, value: 2)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def one_thread_copy(voice: Path, folder: Path) -> Path:
    """`voice` (and its `.onnx.json`, which piper reads beside it) copied into `folder`,
    set to run on one thread."""
    copy = folder / voice.name
    shutil.copyfile(voice, copy)
    shutil.copyfile(f"{voice}.json", f"{copy}.json")
    entry = _field(1, b"ort_config") + _field(2, json.dumps(ONE_THREAD).encode())
    with open(copy, "ab") as model:
        model.write(_field(METADATA_PROPS, entry))
    return copy
