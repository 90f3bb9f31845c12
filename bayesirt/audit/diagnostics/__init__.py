"""Diagnostics of the near-tie audit (NT 4, App. B and D) built on the deterministic engine:
discrimination-matched controls (:mod:`.matched`), within-family specificity (:mod:`.specificity`),
score-gap and anchor-fraction sensitivity (:mod:`.sensitivity`), owner-disjoint replication of item
signatures (:mod:`.replication`), capability-profile overlap (:mod:`.profiles`), exact-common-model
checks across benchmarks (:mod:`.common_models`) and the blinded content audit (:mod:`.content`).
They import the engine and the ability adjustments, never the Bayesian layer."""
