"""Batching settings are stated once (parl.Batching): the config's ``tasks.<name>.batching`` keys are its
fields, and every field given in a config reaches the wrapper, so a new field needs no other change."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

import parl
from parl.experiment.config.build import build_manager
from parl.experiment.config.robot_config import BatchingConfig, load_config
from parl.testing.echo import echo_algorithm_func

CONFIG = "examples/configs/ppo_cartpole.yaml"


def _changed(field: dataclasses.Field, default: parl.Batching) -> object:
    """A value of ``field`` other than its default that the robot config (4 agents) accepts."""
    hint = typing.get_type_hints(parl.Batching)[field.name]
    if hint is float:
        return getattr(default, field.name) * 3
    return 2  # sizes: within the agents, at least min_batchsize's


def test_the_config_keys_are_the_fields_of_batching() -> None:
    assert set(BatchingConfig.model_fields) == {f.name for f in dataclasses.fields(parl.Batching)}
    config_defaults = {name: field.default for name, field in BatchingConfig.model_fields.items()}
    assert config_defaults == dataclasses.asdict(parl.Batching())


@pytest.mark.parametrize("field", dataclasses.fields(parl.Batching), ids=lambda f: f.name)
def test_every_batching_field_of_a_config_reaches_the_wrapper(field: dataclasses.Field) -> None:
    base = {"max_batchsize": 4, "min_batchsize": 1, "max_training_batchsize": 4, "training_timeout": 0.5}
    value = _changed(field, parl.Batching(**base))
    changes = {**base, field.name: value}
    overrides = ["agents=4", "placement=threads"] + [f"tasks.RL.batching.{k}={v}" for k, v in changes.items()]
    manager = build_manager(load_config(CONFIG, overrides))
    assert getattr(manager.wrappers["RL"].batching, field.name) == value
    assert manager.wrappers["RL"].batching == parl.Batching(**changes)


def test_parl_0_1_keywords_still_set_batching_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"TaskSettings\(max_batchsize=\.\.\., training_timeout=\.\.\.\)"):
        settings = parl.TaskSettings(echo_algorithm_func(), max_batchsize=8, training_timeout=1.0)
    with pytest.warns(DeprecationWarning) as caught:
        parl.TaskSettings(echo_algorithm_func(), min_batchsize=2)
        parl.ComputationWrapper(parl.TaskSettings(echo_algorithm_func()).make_task("T"), min_batchsize=2)
    assert [w.filename for w in caught] == [__file__, __file__]  # reported at the line that used them
    assert settings.batching == parl.Batching(max_batchsize=8, training_timeout=1.0)
    with pytest.warns(
        DeprecationWarning, match=r"TaskSettings\.max_batchsize .* TaskSettings\.batching\.max_batchsize"
    ):
        assert settings.max_batchsize == 8
    task = settings.make_task("T")
    with pytest.warns(DeprecationWarning, match=r"ComputationWrapper\(min_batchsize=\.\.\.\)"):
        wrapper = parl.ComputationWrapper(task, min_batchsize=2)
    assert wrapper.batching == parl.Batching(min_batchsize=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            parl.TaskSettings(echo_algorithm_func(), batching=parl.Batching(min_batchsize=3)).batching.min_batchsize
            == 3
        )


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"max_batchsize": 0}, "max_batchsize"),
        ({"training_timeout": 0.0}, "training_timeout"),
        ({"min_batchsize": 3, "max_training_batchsize": 2}, r"min_batchsize \(3\)"),
    ],
)
def test_batching_refuses_bad_settings_naming_them(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parl.Batching(**changes)
