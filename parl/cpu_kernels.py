"""Which code path Intel's math library takes on the CPU this process runs on.

PaddlePaddle's CPU wheels do their matrix products (fully connected layers, and convolutions
through im2col) in Intel's MKL. MKL picks its kernels by CPU vendor: on an AMD processor it runs
a generic SSE path unless ``MKL_DEBUG_CPU_TYPE=5`` tells it the CPU has AVX2, which every AMD
Zen core has. :func:`mkl_environment` gives that variable for an AMD CPU with AVX2 and FMA, and
nothing elsewhere (Intel CPUs get MKL's own choice; other vendors and architectures are left
alone). docs/performance.md has the measured difference.

MKL reads the variable when it first runs a kernel, so it must be set before the first matrix
product of the process; ``import parl`` does it (``parl.threads.prepare_environment``), and a
value the user set is kept.
"""

from __future__ import annotations

import functools
import os
from typing import Dict, FrozenSet, Tuple

CPUINFO = "/proc/cpuinfo"


@functools.lru_cache(maxsize=1)
def cpu_vendor_and_flags(path: str = CPUINFO) -> Tuple[str, FrozenSet[str]]:
    """The first processor's ``vendor_id`` and ``flags`` in ``/proc/cpuinfo`` (``("", frozenset())``
    where there is no such file, as on macOS and Windows)."""
    vendor, flags = "", frozenset[str]()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if vendor and flags:
                    break
    except OSError:
        pass
    return vendor, flags


def mkl_environment(vendor: str, flags: FrozenSet[str], machine: str) -> Dict[str, str]:
    """The environment variables that put MKL on its AVX2 kernels: ``{"MKL_DEBUG_CPU_TYPE": "5"}``
    on an x86-64 AMD CPU with AVX2 and FMA, else none."""
    if machine.lower() not in ("x86_64", "amd64") or vendor != "AuthenticAMD":
        return {}
    if not {"avx2", "fma"} <= flags:
        return {}
    return {"MKL_DEBUG_CPU_TYPE": "5"}


def this_cpu_mkl_environment() -> Dict[str, str]:
    """:func:`mkl_environment` for the CPU this process runs on."""
    vendor, flags = cpu_vendor_and_flags()
    machine = os.uname().machine if hasattr(os, "uname") else ""  # os.uname: no import of platform (~5 ms)
    return mkl_environment(vendor, flags, machine)
