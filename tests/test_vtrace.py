"""V-trace against the paper's definition written out in numpy, segment by segment."""

import numpy as np
import pytest

from parl.algorithms.returns import gae
from parl.algorithms.vtrace import vtrace


def reference(mu, pi, r, v, nv, end, lengths, gamma, rho_bar=1.0, c_bar=1.0):
    """Espeholt et al. (2018), equation (1), as a sum over each segment (no recursion):
    v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (prod_{s<=i<t} c_i) delta_t, and
    A_s = rho_s (r_s + gamma v_{s+1} - V(x_s)); the segment's last row bootstraps from V(x'),
    unless it is terminal (then no bootstrap)."""
    targets, advantages = [], []
    start = 0
    for n in lengths:
        seg = slice(start, start + n)
        s_mu, s_pi, s_r, s_v, s_nv, s_end = mu[seg], pi[seg], r[seg], v[seg], nv[seg], end[seg]
        ratio = np.exp(s_pi - s_mu)
        rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
        # V(x_{t+1}) along the segment: the next row's value, then the bootstrap (0 when terminal).
        v_next = np.append(s_v[1:], 0.0 if s_end[-1] else s_nv[-1])
        delta = rho * (s_r + gamma * v_next - s_v)
        vs = np.zeros(n)
        for s in range(n):
            total, trace = 0.0, 1.0
            for t in range(s, n):
                total += gamma ** (t - s) * trace * delta[t]
                trace *= c[t]
            vs[s] = s_v[s] + total
        vs_next = np.append(vs[1:], 0.0 if s_end[-1] else s_nv[-1])
        targets.append(vs)
        advantages.append(rho * (s_r + gamma * vs_next - s_v))
        start += n
    return np.concatenate(targets), np.concatenate(advantages)


def random_batch(rng, lengths, ends):
    b = sum(lengths)
    end = np.zeros(b)
    last = np.cumsum(lengths) - 1
    end[last] = ends
    v = rng.normal(0.0, 1.0, b)
    # V(next input) is the next row's V(input) inside a segment, as in a helper's segments.
    nv = np.append(v[1:], 0.0)
    nv[last] = rng.normal(0.0, 1.0, len(lengths))
    return dict(
        mu=rng.normal(-1.0, 0.5, b), pi=rng.normal(-1.0, 0.5, b), r=rng.normal(0.0, 1.0, b), v=v, nv=nv, end=end
    )


def run(batch, lengths, gamma, **clips):
    return vtrace(batch["mu"], batch["pi"], batch["r"], batch["v"], batch["nv"], batch["end"], lengths, gamma, **clips)


@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (0.8, 0.5), (2.0, 1.5), (100.0, 100.0)])
def test_several_segments_match_the_definition(rho_bar, c_bar):
    rng = np.random.default_rng(0)
    lengths = (5, 1, 3, 7)
    batch = random_batch(rng, lengths, ends=[1, 0, 0, 1])  # terminated and truncated segments
    got = run(batch, lengths, 0.9, rho_bar=rho_bar, c_bar=c_bar)
    want_vs, want_adv = reference(*batch.values(), lengths, 0.9, rho_bar, c_bar)
    np.testing.assert_allclose(got.values, want_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.advantages, want_adv, rtol=1e-5, atol=1e-5)
    ratio = np.exp(batch["pi"] - batch["mu"])
    np.testing.assert_allclose(got.clipped_rhos, np.minimum(rho_bar, ratio), rtol=1e-6)


def test_clipping_is_active_and_changes_the_targets():
    rng = np.random.default_rng(1)
    lengths = (6,)
    batch = random_batch(rng, lengths, ends=[0])
    batch["pi"] = batch["mu"] + np.log(np.array([3.0, 0.2, 2.5, 1.0, 4.0, 0.5]))
    clipped = run(batch, lengths, 0.95)
    loose = run(batch, lengths, 0.95, rho_bar=10.0, c_bar=10.0)
    assert clipped.clipped_rhos.max() == pytest.approx(1.0)
    assert not np.allclose(clipped.values, loose.values)
    np.testing.assert_allclose(clipped.values, reference(*batch.values(), lengths, 0.95)[0], rtol=1e-5, atol=1e-5)


def test_on_policy_is_the_discounted_bootstrapped_return():
    rng = np.random.default_rng(2)
    lengths = (4, 3)
    batch = random_batch(rng, lengths, ends=[0, 1])
    batch["pi"] = batch["mu"]
    got = run(batch, lengths, 0.9)
    r, nv = batch["r"], batch["nv"]
    # Truncated segment: rewards to its end plus gamma^k V(x'); terminated one: rewards only.
    first = [sum(0.9**k * r[t + k] for k in range(4 - t)) + 0.9 ** (4 - t) * nv[3] for t in range(4)]
    second = [sum(0.9**k * r[4 + t + k] for k in range(3 - t)) for t in range(3)]
    np.testing.assert_allclose(got.values, first + second, rtol=1e-5, atol=1e-5)
    # ... which is A2C's n-step return, GAE at lambda 1 plus the value.
    n_step = gae(r, batch["v"], nv, batch["end"], lengths, 0.9, 1.0) + batch["v"]
    np.testing.assert_allclose(got.values, n_step, rtol=1e-5, atol=1e-5)
    # The advantages are the one-step returns on v_s: the n-step advantages.
    np.testing.assert_allclose(got.advantages, n_step - batch["v"], rtol=1e-5, atol=1e-5)


def test_truncation_bootstraps_and_termination_does_not():
    rng = np.random.default_rng(3)
    lengths = (3,)
    truncated = random_batch(rng, lengths, ends=[0])
    terminated = dict(truncated, end=np.array([0.0, 0.0, 1.0]))
    bigger = dict(truncated, nv=truncated["nv"] + np.array([0.0, 0.0, 5.0]))
    bigger_terminated = dict(terminated, nv=bigger["nv"])
    assert run(bigger, lengths, 0.9).values[-1] > run(truncated, lengths, 0.9).values[-1]
    np.testing.assert_array_equal(run(terminated, lengths, 0.9).values, run(bigger_terminated, lengths, 0.9).values)


def test_joined_segments_are_independent():
    rng = np.random.default_rng(4)
    a, b = random_batch(rng, (4,), ends=[0]), random_batch(rng, (2,), ends=[1])
    joined = {k: np.concatenate([a[k], b[k]]) for k in a}
    together = run(joined, (4, 2), 0.99)
    np.testing.assert_allclose(together.values, np.concatenate([run(a, (4,), 0.99).values, run(b, (2,), 0.99).values]))


def test_bad_arguments_name_the_value():
    batch = random_batch(np.random.default_rng(5), (2,), ends=[0])
    with pytest.raises(ValueError, match="rho_bar"):
        run(batch, (2,), 0.9, rho_bar=0.0)
    with pytest.raises(ValueError, match="sum to 3"):
        run(batch, (3,), 0.9)
    with pytest.raises(ValueError, match="gamma"):
        run(batch, (2,), 1.5)
