"""The deterministic near-tie (NT) engine: residual family DIF by clipped Newton (:mod:`.dif`, its
compiled loops in :mod:`.dif_kernel`), blueprint cells and anchor purification (:mod:`.anchors`),
near-tie pairs, scores and reversals (:mod:`.ranking`), matched-random controls and the fold packing
every reference shares (:mod:`.resampling`), the composition and owner bootstraps (:mod:`.bootstrap`),
and the audit's settings and results (:mod:`.result`). It imports only the ability adjustments
(:mod:`bayesirt.audit.adjustment`), never the diagnostics or the Bayesian layer."""
