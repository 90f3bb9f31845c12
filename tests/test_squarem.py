"""SQUAREM (bayesirt.frequentist.squarem) on fixed-point maps whose fixed point is known: the
extrapolation reaches it in fewer EM steps, the objective never decreases, the safeguard falls back to
the plain steps, and the iteration budget is kept."""

from __future__ import annotations

import numpy as np
import pytest

from bayesirt.frequentist.squarem import EMPoint, em_updates

TARGET = np.array([1.0, -2.0, 0.5])
RATES = np.array([0.95, 0.9, 0.5])  # a slow linear EM map: x -> target + rates * (x - target)


def at(x: np.ndarray) -> EMPoint:
    return EMPoint(x, -float(((x - TARGET) ** 2).sum()), None)


def em_step(point: EMPoint) -> EMPoint:
    return at(TARGET + RATES * (point.x - TARGET))


def run(accelerate: bool, max_iter: int = 2000, tol: float = 1e-10, evaluate=at):
    point, steps, trace = at(np.zeros(3)), 0, [at(np.zeros(3)).objective]
    for new, trail in em_updates(point, em_step, evaluate, max_iter, accelerate=accelerate):
        steps += len(trail)
        trace += [p.objective for p in trail]
        done = np.abs(new.x - point.x).max() < tol
        point = new
        if done:
            break
    return point, steps, np.array(trace)


def test_squarem_reaches_the_fixed_point_of_plain_em_in_fewer_steps():
    plain, plain_steps, _ = run(False)
    fast, fast_steps, trace = run(True)
    np.testing.assert_allclose(plain.x, TARGET, atol=1e-8)
    np.testing.assert_allclose(fast.x, TARGET, atol=1e-8)
    assert fast_steps * 4 < plain_steps
    assert trace.size == fast_steps + 1
    assert (np.diff(trace) >= 0).all()


def test_a_refused_extrapolation_falls_back_to_the_plain_steps():
    refuse = lambda x: EMPoint(x, -np.inf, None)  # noqa: E731 (every extrapolated point is out of bounds)
    fast, steps, trace = run(True, max_iter=40, tol=0.0, evaluate=refuse)
    plain, plain_steps, _ = run(False, max_iter=40, tol=0.0)
    assert steps == plain_steps == 40
    np.testing.assert_allclose(fast.x, plain.x, rtol=1e-12)  # the same iterates: F applied 40 times
    assert (np.diff(trace) >= 0).all()


def test_a_worse_stabilized_point_is_not_kept():
    bad_step = lambda p: at(p.x) if np.abs(p.x - TARGET).max() > 5 else em_step(p)  # noqa: E731
    point = at(np.zeros(3))
    updates = list(em_updates(point, bad_step, lambda x: at(x * 0 + 50.0), 40))
    for new, trail in updates:
        assert new.objective >= point.objective
        assert all(b.objective >= a.objective for a, b in zip(trail, trail[1:]))
        point = new


@pytest.mark.parametrize("max_iter", [1, 2, 3, 7])
@pytest.mark.parametrize("accelerate", [False, True])
def test_the_iteration_budget_counts_every_em_step(max_iter, accelerate):
    calls = []

    def counted(point):
        calls.append(1)
        return em_step(point)

    steps = sum(len(trail) for _, trail in em_updates(at(np.zeros(3)), counted, at, max_iter, accelerate=accelerate))
    assert steps == len(calls) == max_iter
