"""Reading back the scalars of tensorboardX event files, record by record (TFRecord framing: uint64
length, uint32 CRC of it, the Event proto, uint32 CRC of it)."""

from __future__ import annotations

import glob
import os
import struct
from typing import List, Tuple

from tensorboardX.proto import event_pb2


def read_scalar_events(log_dir: str) -> List[Tuple[int, str, float]]:
    """(step, tag, value) of every scalar in the event files ``events.out.tfevents.*`` of ``log_dir``."""
    found = []
    paths = sorted(glob.glob(os.path.join(str(log_dir), "events.out.tfevents.*")))
    assert paths, f"no event file in {log_dir}"
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 16 + length
            found += [(event.step, value.tag, value.simple_value) for value in event.summary.value]
    return found
