"""MKL's kernel path by CPU vendor: AVX2 kernels on AMD CPUs that have AVX2, nothing changed elsewhere."""

import os
import subprocess
import sys

import pytest

from parl import cpu_kernels

AVX2 = frozenset({"sse2", "avx", "avx2", "fma"})


def test_amd_with_avx2_gets_mkl_avx2_kernels():
    assert cpu_kernels.mkl_environment("AuthenticAMD", AVX2, "x86_64") == {"MKL_DEBUG_CPU_TYPE": "5"}


@pytest.mark.parametrize(
    "vendor, flags, machine",
    [
        ("GenuineIntel", AVX2, "x86_64"),  # MKL picks Intel's kernels itself
        ("AuthenticAMD", frozenset({"sse2", "avx", "fma"}), "x86_64"),  # no AVX2: MKL's AVX2 kernels would fault
        ("AuthenticAMD", frozenset({"sse2", "avx", "avx2"}), "x86_64"),  # no FMA
        ("AuthenticAMD", AVX2, "aarch64"),
        ("", frozenset(), "x86_64"),  # no /proc/cpuinfo
    ],
)
def test_other_cpus_get_nothing(vendor, flags, machine):
    assert cpu_kernels.mkl_environment(vendor, flags, machine) == {}


def test_cpuinfo_is_read_for_vendor_and_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu\n"
    )
    vendor, flags = cpu_kernels.cpu_vendor_and_flags.__wrapped__(str(info))
    assert vendor == "AuthenticAMD" and flags == frozenset({"fpu", "sse2", "avx", "avx2", "fma"})
    assert cpu_kernels.cpu_vendor_and_flags.__wrapped__(str(tmp_path / "missing")) == ("", frozenset())


def test_import_sets_the_mkl_variable_for_this_cpu_and_keeps_a_users_value():
    code = "import os, parl; print(repr(os.environ.get('MKL_DEBUG_CPU_TYPE')))"
    env = {k: v for k, v in os.environ.items() if k != "MKL_DEBUG_CPU_TYPE"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    expected = cpu_kernels.this_cpu_mkl_environment().get("MKL_DEBUG_CPU_TYPE")
    assert out.stdout.strip() == repr(expected)
    env["MKL_DEBUG_CPU_TYPE"] = "2"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr("2")
