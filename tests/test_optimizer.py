"""parl's lean Adam and RMSProp match paddle.optimizer.Adam and RMSProp update for update."""

import numpy as np
import paddle
import pytest

from parl.layers.optimizer import Adam, OptimizerStateError, RMSProp


def _pair(seed: int):
    rng = np.random.default_rng(seed)
    init = rng.standard_normal((3, 2)).astype(np.float32)
    a = paddle.create_parameter([3, 2], "float32")
    b = paddle.create_parameter([3, 2], "float32")
    a.set_value(init)
    b.set_value(init)
    return a, b


def _loss(p, i):
    return ((p * p) * (i + 1) + p).sum()


def _same_updates(ours, mine, reference, theirs) -> None:
    """Six steps of ``ours`` on ``mine`` and of paddle's ``reference`` on ``theirs``: equal after each."""
    for i in range(6):
        for optimizer, param in ((ours, mine), (reference, theirs)):
            _loss(param, i).backward()
            optimizer.step()
            optimizer.clear_grad()
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_clip", [None, 0.5])
def test_same_updates_as_paddle_adam(grad_clip):
    mine, theirs = _pair(0)
    ours = Adam([mine], learning_rate=0.01, grad_clip=grad_clip)
    clip = paddle.nn.ClipGradByGlobalNorm(grad_clip) if grad_clip else None
    reference = paddle.optimizer.Adam(learning_rate=0.01, parameters=[theirs], grad_clip=clip)
    _same_updates(ours, mine, reference, theirs)


@pytest.mark.parametrize(
    "make, state_keys",
    [
        (lambda p: Adam([p], learning_rate=0.05), {"moment1", "moment2", "beta1_pow", "beta2_pow"}),
        (
            lambda p: RMSProp([p], learning_rate=0.05, momentum=0.5, centered=True),
            {"mean_square", "moment", "mean_grad"},
        ),
    ],
    ids=["adam", "rmsprop"],
)
def test_state_dict_round_trip_continues_identically(make, state_keys):
    p1, p2 = _pair(1)
    opt1 = make(p1)
    for i in range(3):
        _loss(p1, i).backward()
        opt1.step()
        opt1.clear_grad()
    p2.set_value(p1.numpy())
    # p2 has the same name scheme but a different parameter name: map keys as a checkpoint does.
    state = {k.replace(p1.name, p2.name): v for k, v in opt1.state_dict().items()}
    assert {k[len(p2.name) + 1 :] for k in state if k != "learning_rate"} == state_keys
    opt2 = make(p2)
    opt2.set_state_dict(state)
    for opt, p in ((opt1, p1), (opt2, p2)):
        _loss(p, 3).backward()
        opt.step()
        opt.clear_grad()
    np.testing.assert_array_equal(p1.numpy(), p2.numpy())


def test_bad_settings_and_missing_state_raise():
    p, _ = _pair(2)
    with pytest.raises(ValueError, match="learning_rate.*-0.1"):
        Adam([p], learning_rate=-0.1)
    with pytest.raises(ValueError, match="parameter"):
        Adam([], learning_rate=0.1)
    with pytest.raises(ValueError, match="moment1"):
        Adam([p]).set_state_dict({})


@pytest.mark.parametrize("optimizer", [Adam, RMSProp])
def test_learning_rate_can_change(optimizer):
    p, _ = _pair(3)
    opt = optimizer([p], learning_rate=0.1)
    opt.set_lr(0.02)
    assert opt.get_lr() == pytest.approx(0.02)


@pytest.mark.parametrize(
    "grad_clip, momentum, centered", [(None, 0.0, False), (0.5, 0.0, False), (None, 0.9, True), (0.5, 0.5, False)]
)
def test_same_updates_as_paddle_rmsprop(grad_clip, momentum, centered):
    mine, theirs = _pair(0)
    ours = RMSProp(
        [mine], learning_rate=0.01, alpha=0.9, epsilon=1e-5, momentum=momentum, centered=centered, grad_clip=grad_clip
    )
    clip = paddle.nn.ClipGradByGlobalNorm(grad_clip) if grad_clip else None
    reference = paddle.optimizer.RMSProp(
        learning_rate=0.01,
        rho=0.9,
        epsilon=1e-5,
        momentum=momentum,
        centered=centered,
        parameters=[theirs],
        grad_clip=clip,
    )
    start = mine.numpy().copy()
    _same_updates(ours, mine, reference, theirs)
    assert not np.allclose(mine.numpy(), start)  # the updates did move the parameters


def test_first_step_follows_the_formula():
    """ms = (1 - alpha) g^2 from zero, so the first step is lr * g / sqrt((1 - alpha) g^2 + eps)."""
    p, _ = _pair(4)
    start = p.numpy().copy()
    opt = RMSProp([p], learning_rate=0.1, alpha=0.99, epsilon=1e-5)
    _loss(p, 0).backward()
    grad = 2 * start + 1
    opt.step()
    expected = start - 0.1 * grad / np.sqrt(0.01 * grad**2 + 1e-5)
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_bad_rmsprop_settings_and_missing_state_raise():
    p, _ = _pair(2)
    with pytest.raises(ValueError, match="learning_rate.*-0.1"):
        RMSProp([p], learning_rate=-0.1)
    with pytest.raises(ValueError, match="alpha.*1.5"):
        RMSProp([p], alpha=1.5)
    with pytest.raises(ValueError, match="momentum.*-1"):
        RMSProp([p], momentum=-1)
    with pytest.raises(ValueError, match="epsilon.*0"):
        RMSProp([p], epsilon=0.0)
    with pytest.raises(ValueError, match="RMSProp needs at least one parameter"):
        RMSProp([])
    with pytest.raises(ValueError, match="mean_square"):
        RMSProp([p]).set_state_dict({})


def _stepped_state(optimizer, param) -> dict:
    for i in range(3):
        _loss(param, i).backward()
        optimizer.step()
        optimizer.clear_grad()
    return optimizer.state_dict()


@pytest.mark.parametrize(
    "slot, value, words",
    [
        ("beta1_pow", 1.5, r"holds values in \[1.5, 1.5\], beyond the possible \[0, 0.9\]"),  # fewer than no steps
        ("beta2_pow", -0.1, r"beyond the possible \[0, 0.999"),
        ("moment2", -1.0, r"beyond the possible \[0, inf\]"),
        ("moment1", np.nan, "holds NaN or infinite values"),
    ],
)
def test_an_implausible_adam_state_is_refused_and_changes_nothing(slot, value, words):
    p, q = _pair(4)
    state = _stepped_state(Adam([p]), p)
    target = Adam([q])
    before = target.state_dict()
    bad = {k.replace(p.name, q.name): v for k, v in state.items()}
    key = f"{q.name}_{slot}"
    bad[key] = np.full_like(bad[key], value)
    with pytest.raises(OptimizerStateError, match=words) as info:
        target.set_state_dict(bad)
    assert info.value.key == key
    assert all(np.array_equal(before[k], v, equal_nan=True) for k, v in target.state_dict().items())


def test_an_optimizer_state_of_another_shape_is_refused():
    p, q = _pair(5)
    state = {k.replace(p.name, q.name): v for k, v in _stepped_state(RMSProp([p]), p).items()}
    state[f"{q.name}_moment"] = np.zeros((3, 3), np.float32)
    with pytest.raises(OptimizerStateError, match=r"has shape \[3, 3\], the optimizer keeps \[3, 2\]"):
        RMSProp([q]).check_state_dict(state)
    state[f"{q.name}_moment"] = np.zeros((3, 2), np.float32)
    RMSProp([q]).check_state_dict(state)  # fits
