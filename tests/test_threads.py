"""Intra-op thread settings: one thread by default, configurable, bad values named."""

import os
import subprocess
import sys

import pytest

from parl import threads


def test_default_is_one_thread(monkeypatch):
    monkeypatch.delenv("PARL_NUM_THREADS", raising=False)
    assert threads.default_num_threads() == 1


def test_environment_variable_sets_the_count(monkeypatch):
    monkeypatch.setenv("PARL_NUM_THREADS", "3")
    assert threads.default_num_threads() == 3


@pytest.mark.parametrize("raw", ["0", "-2", "two"])
def test_bad_environment_value_is_named(monkeypatch, raw):
    monkeypatch.setenv("PARL_NUM_THREADS", raw)
    with pytest.raises(ValueError, match=f"PARL_NUM_THREADS.*{raw}"):
        threads.default_num_threads()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_set_num_threads_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="num_threads"):
        threads.set_num_threads(bad)


def test_import_sets_thread_variables_only_when_unset():
    code = "import os, parl; print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PARL_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
    env["OMP_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "1"]
