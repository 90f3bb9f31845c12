"""The command-line tool (:mod:`.main`, its grammar in :mod:`.parser`) and the runner of declared
analyses (:mod:`bayesirt.jobs.analysis`)."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.jobs.analysis import load_analysis, run_analysis
    from bayesirt.jobs.fit import run_fit_job

__getattr__, __dir__, __all__ = attach(__name__, __file__)
