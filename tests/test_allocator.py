"""glibc's malloc thresholds: tensors of a few megabytes are reused from the heap, not faulted in anew."""

import os
import subprocess
import sys

import pytest

from parl import allocator

# 20 paddle kernels each writing a new 6.4 MB tensor (the gradient of a 3136x512 layer, scaled):
# the page faults of the loop.
FAULTS = """
import resource, paddle
{setup}
grad = paddle.ones([3136, 512])
paddle.scale(grad, 0.5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    paddle.scale(grad, 0.5)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = 3136 * 512 * 4 // 4096  # pages of one tensor


def faults(setup: str, env: dict) -> int:
    code = FAULTS.format(setup=setup)
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt exists on Linux only")
def test_large_tensors_are_reused_after_keep_tensor_memory():
    env = {k: v for k, v in os.environ.items() if k not in allocator.USER_VARIABLES}
    setup = "from parl.allocator import keep_tensor_memory; assert keep_tensor_memory()"
    assert faults(setup, env) < 2 * PAGES  # the block is reused: at most one tensor's pages faulted in
    assert faults("", env) > 10 * PAGES  # glibc's defaults: each tensor is a fresh mmap, faulted in


def test_a_users_malloc_variables_are_kept(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert allocator.keep_tensor_memory() is False
