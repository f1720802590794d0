"""parl's lean Adam matches paddle.optimizer.Adam update for update."""

import numpy as np
import paddle
import pytest

from parl.layers.optimizer import Adam


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


@pytest.mark.parametrize("grad_clip", [None, 0.5])
def test_same_updates_as_paddle_adam(grad_clip):
    mine, theirs = _pair(0)
    ours = Adam([mine], learning_rate=0.01, grad_clip=grad_clip)
    clip = paddle.nn.ClipGradByGlobalNorm(grad_clip) if grad_clip else None
    reference = paddle.optimizer.Adam(learning_rate=0.01, parameters=[theirs], grad_clip=clip)
    for i in range(6):
        _loss(mine, i).backward()
        ours.step()
        ours.clear_grad()
        _loss(theirs, i).backward()
        reference.step()
        reference.clear_grad()
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_continues_identically():
    p1, p2 = _pair(1)
    opt1 = Adam([p1], learning_rate=0.05)
    for i in range(3):
        _loss(p1, i).backward()
        opt1.step()
        opt1.clear_grad()
    p2.set_value(p1.numpy())
    # p2 has the same name scheme but a different parameter name: map keys as a checkpoint does.
    state = {k.replace(p1.name, p2.name): v for k, v in opt1.state_dict().items()}
    opt2 = Adam([p2], learning_rate=0.05)
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


def test_learning_rate_can_change():
    p, _ = _pair(3)
    opt = Adam([p], learning_rate=0.1)
    opt.set_lr(0.02)
    assert opt.get_lr() == pytest.approx(0.02)
