"""glibc's malloc thresholds for PaddlePaddle's CPU tensors.

Paddle allocates the output of every CPU kernel with ``malloc``. glibc serves an allocation larger
than its mmap threshold with a fresh ``mmap`` and unmaps it on ``free``, so each new tensor of a few
megabytes (the gradient of a 3136x512 layer, a batch of stacked Atari frames in float32) is faulted
in page by page at every use, which costs more than the kernel that fills it, most of all inside a
virtual machine. :func:`keep_tensor_memory` raises the mmap threshold to 32 MiB (the largest chunk a
thread's own malloc arena serves; paddle's training thread is not the main one) and the trim
threshold with it, so those blocks are reused from the heap. Allocations above 32 MiB (replay
buffers, ``np.zeros`` of many transitions) still get their own lazily zeroed ``mmap``, so memory
that is reserved and not yet written stays out of the resident set.

A value the user set with ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` is kept; on
other C libraries (macOS, Windows, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters of glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
#: Allocations up to this size come from the heap (and are reused) rather than from their own mmap.
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free memory at the top of a heap kept for reuse instead of being returned to the system.
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
USER_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_tensor_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (see the module docstring); returns
    whether they were set (False: not glibc on Linux, or the user set them)."""
    if not sys.platform.startswith("linux") or any(var in os.environ for var in USER_VARIABLES):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")  # glibc's soname (find_library would run ldconfig: ~10 ms at import)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
