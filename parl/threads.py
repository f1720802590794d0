"""Intra-op thread count for PaddlePaddle's CPU kernels.

A small network at batch 8 runs about four times faster with one intra-op
thread than with two on a 2-core machine, and a robot runs many agents and a
training loop beside the kernels, so parl uses one thread per process unless
told otherwise through ``PARL_NUM_THREADS`` or :func:`set_num_threads`.
"""

import os

from parl.allocator import keep_tensor_memory
from parl.cpu_kernels import this_cpu_mkl_environment

_ENV_VAR = "PARL_NUM_THREADS"
_THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def default_num_threads() -> int:
    """The thread count from ``PARL_NUM_THREADS``, or 1 when it is unset."""
    raw = os.environ.get(_ENV_VAR, "1")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{_ENV_VAR} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{_ENV_VAR} must be a positive integer, got {raw!r}")
    return value


def prepare_environment() -> None:
    """Set the thread variables the math libraries read when they start.

    Only variables the user has not set are touched, so an explicit
    ``OMP_NUM_THREADS`` always wins. ``KMP_AFFINITY=disabled`` stops Intel's
    OpenMP runtime (used by PaddlePaddle's CPU kernels) from resetting the
    affinity of each thread that first runs a matrix multiply to the mask it
    saw at start-up, which would undo the thread placement of
    :mod:`parl.affinity` (measured: half the env steps per second
    with 32 agents). It is read when the runtime starts, at the first matrix
    multiply, so it works even when paddle was imported before parl.

    On AMD CPUs it also puts MKL on its AVX2 kernels (:mod:`parl.cpu_kernels`),
    read at the same moment, and on Linux it keeps tensors of a few megabytes
    in malloc's heap for reuse (:mod:`parl.allocator`).
    """
    n = str(default_num_threads())
    for var in _THREAD_ENV_VARS:
        os.environ.setdefault(var, n)
    os.environ.setdefault("KMP_AFFINITY", "disabled")
    for var, value in this_cpu_mkl_environment().items():
        os.environ.setdefault(var, value)
    keep_tensor_memory()


def set_num_threads(num_threads: int) -> None:
    """Set PaddlePaddle's intra-op CPU thread count for this process."""
    if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
    from paddle.base import core

    core.set_num_threads(num_threads)
