"""SQUAREM acceleration of the EM fixed-point map, shared by the MML engines (:mod:`.mml`, :mod:`.mml_mirt`).

Varadhan & Roland (2008), "Simple and globally convergent methods for accelerating the convergence
of any EM algorithm", Scand. J. Statist. 35: 335-353, scheme S3. From ``x`` (the parameters in
unconstrained coordinates, e.g. log slope and logit asymptotes) two EM steps give
``r = F(x) - x`` and ``v = F(F(x)) - 2 F(x) + x``; the step length is ``alpha = |r| / |v|``, clipped
to ``[1, step_max]``, and the extrapolation ``x + 2 alpha r + alpha^2 v`` (``alpha = 1`` is the
two plain steps, ``F(F(x))``). One EM step from the extrapolation stabilizes it. The safeguard:
the cycle ends there only when the extrapolation's objective (the log marginal likelihood, or the
log posterior with priors) is finite and the stabilized point's objective is at least that of the
two plain steps; otherwise it falls back to ``F(F(x))``, so the objective never decreases.
``step_max`` starts at 1 and is multiplied by 4 each time the step reaches it and divided by 4
(not below 1) when the extrapolation is refused (the package ``SQUAREM``'s defaults: ``step.max0
= 1``, ``mstep = 4``). Every EM step counts as an iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

__all__ = ["EMPoint", "em_updates"]

_MSTEP = 4.0


class EMPoint(NamedTuple):
    x: np.ndarray  # the parameters in the unconstrained coordinates that are extrapolated
    objective: float  # what EM increases
    state: Any  # the caller's: what its EM step starts from (the parameters, the E-step's posteriors)


def em_updates(start: EMPoint, em_step: Callable[[EMPoint], EMPoint], at: Callable[[np.ndarray], EMPoint],
               max_iter: int, *, accelerate: bool = True) -> Iterator[tuple[EMPoint, tuple[EMPoint, ...]]]:
    """EM updates from ``start`` until ``max_iter`` EM steps: each a plain EM step or, with
    ``accelerate``, a SQUAREM cycle (the module notes).

    ``em_step`` maps a point to the next EM iterate; ``at`` builds the point (E-step, objective) of
    unconstrained coordinates, with a non-finite objective where they are not allowed. Yields
    ``(new, trail)``: the point after the update and, for each of its EM steps, the iterate after
    it (a refused extrapolation leaves the iterate at ``F(F(x))``, so the trail never decreases);
    the caller stops when it has converged."""
    point, it, step_max = start, 0, 1.0
    while it < max_iter:
        one = em_step(point)
        it += 1
        if not accelerate or it == max_iter:
            yield one, (one,)
            point = one
            continue
        two = em_step(one)
        it += 1
        r, v = one.x - point.x, two.x - 2 * one.x + point.x
        norm_v = float(np.sqrt((v**2).sum()))
        alpha = min(float(np.sqrt((r**2).sum())) / norm_v, step_max) if norm_v > 0 else 1.0
        new, trail = two, (one, two)
        if alpha > 1.0 and it < max_iter:
            jump, three = at(point.x + 2 * alpha * r + alpha**2 * v), None
            if np.isfinite(jump.objective):
                three = em_step(jump)
                it += 1
                trail = (one, two, two)
            if three is not None and three.objective >= two.objective:
                new, trail = three, (one, two, three)
                step_max *= _MSTEP if alpha == step_max else 1.0
            else:
                step_max = max(1.0, step_max / _MSTEP)
        elif alpha == step_max:
            step_max *= _MSTEP
        yield new, trail
        point = new
