"""ADVI (mean-field and full-rank) for :func:`bayesirt.inference.fit`: Adam steps on PyMC's variational objective,
stopped when the loss settles (:class:`LossPlateau`), with the learning rate annealed by default."""

from __future__ import annotations

import json
import time

import numpy as np
import pymc as pm
import pytensor
import xarray as xr
from pymc.pytensorf import collect_default_updates, compile, reseed_rngs

from bayesirt.utils.progress import progress_bar

__all__ = ["ANNEAL_RATES", "ANNEAL_WINDOW", "SCORE_EVERY", "SCORE_SPARSELY_FROM", "LossPlateau", "run_advi", "step_function"]

#: Observed cells from which the ADVI loss is not evaluated at every step (see ``LossPlateau``):
#: below it a step is cheap and the window mean of 100 noisy estimates was too noisy for the
#: tolerance (full-rank ADVI on 20 x 60 ran to the 50,000-step cap).
SCORE_SPARSELY_FROM = 100_000


#: Steps per loss evaluation from ``SCORE_SPARSELY_FROM`` cells: full batch, and minibatch (whose
#: noise-aware rule needs the standard error of the window mean, so more values per window). One
#: loss costs about two steps (300 x 1,000 2PL: 10.7 vs 5.3 ms CPU, ``benchmarks/float32_advi.py``), so every 20th step
#: instead of every 5th saves about a fifth of a full-batch fit. The optimizer steps are the
#: same either way (the loss has its own random stream); only where the rule stops can move.
SCORE_EVERY = {"full": 20, "minibatch": 5}


#: Mean-field ADVI's default learning rates (Adam): each kept until the loss settles, the fit stopping
#: when it settles at the last. A large rate crosses the distance to the optimum in a few hundred
#: steps but then jitters around it; each drop removes most of that jitter. On a 300 x 1,000 2PL,
#: 1,400 steps reached a loss (mean of the last window 159,126) below that of 4,000 steps at a constant
#: 0.01 (159,152), with the same correlations with the truth (``benchmarks/results/advi_pyirt.md``).
ANNEAL_RATES = (0.1, 0.02, 0.004, 0.0008)


#: Loss window (iterations) of the annealed schedule; a constant rate keeps ``LossPlateau``'s 500.
ANNEAL_WINDOW = 200


class LossPlateau:
    """Stop ADVI when successive window means of the loss stop changing, for ``patience`` windows
    in a row: when the change is below ``tolerance`` (relative), or, with ``noise_aware`` (set for
    minibatch fits), below two standard errors of the difference of the two means. Minibatches
    make the loss estimate so noisy that a change below ``tolerance`` may never be observable
    (a 200 x 100 2PL at a quarter of the cells per step ran 50,000 steps). Full-batch fits keep
    the plain rule: with it, full-rank ADVI's slow steps (learning rate 0.001) on a small design
    stopped before it had converged. Window means, not single iterations, because the
    stochastic ELBO estimate is noisy at every step.

    The loss (negative ELBO, a fresh one-sample estimate) is evaluated every ``every`` steps by a
    separate function, not by the optimizer step: a step that also returns its loss cost 2.5-4x
    one that only updates (2,000 x 500 2PL), because the log-likelihood value needs a softplus per
    cell that the gradient does not. On a 300 x 1,000 2PL the fit took 26 s instead of 120 s, with
    the same iterations and estimates.

    With several learning ``rates`` (annealing), a settled loss moves the fit to the next rate
    (``set_rate``) instead of stopping it, until the last; ``rate_changes`` records the iteration of
    each move. The window before a move stays the reference of the next comparison, so a rate that
    brings no improvement beyond the noise gives way after one window.
    """

    def __init__(self, tolerance: float, score, noise_aware: bool = False, window: int = 500, patience: int = 2,
                 every: int = 1, rates: tuple[float, ...] = (), set_rate=None):
        self.tolerance, self.score, self.noise_aware = tolerance, score, noise_aware
        self.window, self.patience, self.every = window, patience, every
        self.rates, self.set_rate, self.stage = tuple(rates), set_rate, 0
        self.rate_changes: list[int] = []
        self.first_score_s = 0.0  # the first loss evaluation, where numba compiles the loss
        self.calm = 0
        self.previous = None
        self.stopped_at = None
        self.iterations: list[int] = []
        self.losses: list[float] = []

    def __call__(self, i: int) -> None:
        if i % self.every:
            return
        self.iterations.append(i)
        t0 = time.perf_counter()
        self.losses.append(float(self.score()))
        if len(self.losses) == 1:
            self.first_score_s = time.perf_counter() - t0
        if i % self.window:
            return
        window = np.asarray(self.losses[-(self.window // self.every):])
        current = (float(window.mean()), float(window.var(ddof=1)) / window.size)
        if self.previous is not None:
            change = abs(current[0] - self.previous[0])
            noise = 2.0 * np.sqrt(current[1] + self.previous[1]) if self.noise_aware else 0.0
            self.calm = self.calm + 1 if change < max(self.tolerance * abs(current[0]), noise) else 0
            if self.calm >= self.patience:
                if self.stage + 1 < len(self.rates):
                    self.stage += 1
                    self.set_rate(self.rates[self.stage])
                    self.rate_changes.append(i)
                    self.calm = 0
                else:
                    self.stopped_at = i
                    raise StopIteration(f"ADVI loss settled at iteration {i}")
        self.previous = current


def run_advi(pm_model, method, iterations, tolerance, rates, draws, seed, progress, timings):
    t0 = time.perf_counter()
    inference = (pm.ADVI if method == "advi" else pm.FullRankADVI)(model=pm_model, random_seed=seed)
    minibatch = getattr(pm_model, "minibatch", False)
    every = SCORE_EVERY["minibatch" if minibatch else "full"] if getattr(pm_model, "n_cells", 0) >= SCORE_SPARSELY_FROM else 1
    # The rate is a shared variable, so annealing changes it without recompiling the step.
    rate = pytensor.shared(np.asarray(rates[0], dtype=pytensor.config.floatX), name="advi_learning_rate")
    annealed = len(rates) > 1
    plateau = LossPlateau(
        tolerance, inference.objective.score_function(), noise_aware=minibatch or annealed, every=every,
        **({"window": ANNEAL_WINDOW, "patience": 1, "rates": rates,
            "set_rate": lambda r: rate.set_value(np.asarray(r, dtype=rate.dtype))} if annealed else {}))
    step = step_function(inference.objective, pm.adam(learning_rate=rate), seed)
    params = inference.approx.params
    built_s = time.perf_counter() - t0
    # the fit stops on the loss plateau, not at the cap: its lines count steps and bound the time by the cap
    until = f"the loss settles at the last of {len(rates)} learning rates" if annealed else "the loss settles"
    with progress_bar(iterations, f"ADVI ({method})", enabled=progress, until=until,
                      detail=(lambda: f"learning rate {plateau.stage + 1} of {len(rates)}") if annealed else None) \
            as advance:
        try:
            for i in range(1, iterations + 1):
                if i == 1:
                    t1 = time.perf_counter()
                    step()  # numba compiles the step on its first call
                    built_s += time.perf_counter() - t1
                else:
                    step()
                advance()
                plateau(i)
                if i % plateau.every == 0 and not all(np.isfinite(p.get_value()).all() for p in params):
                    raise FloatingPointError(f"ADVI diverged at iteration {i} (non-finite variational parameters)")
        except StopIteration:
            pass
    timings["fit_s"] = time.perf_counter() - t0
    # compile_s (part of fit_s): building the step and loss functions and their first calls, where
    # numba compiles them (a few seconds for a new model structure and size, under a second when
    # PyTensor's on-disk cache holds them from an earlier fit)
    timings["compile_s"] = built_s + plateau.first_score_s
    tree = inference.approx.sample(draws, random_seed=seed)
    loss = np.asarray(plateau.losses)
    attrs = {
        "advi_iterations_run": int(plateau.stopped_at or iterations),
        "advi_converged": int(plateau.stopped_at is not None),
        "advi_final_loss": float(np.mean(loss[-(plateau.window // plateau.every):])),
    }
    if annealed:
        attrs["advi_rate_changes"] = json.dumps(plateau.rate_changes)
    stats = xr.Dataset({"advi_loss": ("iteration", loss)}, coords={"iteration": np.asarray(plateau.iterations)})
    return xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset(), "variational_fit": stats}), attrs


def step_function(objective, optimizer, seed: int):
    """One optimizer update of the variational parameters, returning nothing.

    PyMC's ``step_function(score=False)`` collects the random generators to advance only from the
    function's outputs, which are empty, so its Monte Carlo draw is the same at every step and the
    fit diverges (checked on PyMC 6.4). Here the generators are collected from the updates.
    """
    updates = objective.updates(obj_optimizer=optimizer)
    rng_updates = collect_default_updates(outputs=list(updates.values()))
    reseed_rngs(list(rng_updates), seed)
    return compile([], [], updates={**updates, **rng_updates}, random_seed=False)
