"""The Bayesian layer of the near-tie audit: the residual-DIF posterior carried through the
anchor -> reversal chain (:mod:`.posterior`; per-item Laplace draws in :mod:`.laplace`, the
Bayesian bootstrap in :mod:`.bootstrap`), the posterior counterparts of the diagnostics
(:mod:`.diagnostics`, :mod:`.matched`, shared pieces in :mod:`.posterior_draws`) and the near-tie
leaderboard with uncertainty (:mod:`.near_ties`, paired accuracy in :mod:`.paired`)."""
