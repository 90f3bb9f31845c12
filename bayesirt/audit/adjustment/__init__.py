"""Ability adjustments of the near-tie audit (``--adjustment``): the capability offsets o_im that the
residual DIF is fitted around. The spectral MIRT working model with its nested K selection (NT C.2,
C.3; :mod:`.spectral`), the direct penalized joint MIRT (NT B.1; :mod:`.joint_mirt`) and the PyMC
exploratory MIRT (:mod:`.bayes_mirt`). Nothing here imports the rest of the audit."""
