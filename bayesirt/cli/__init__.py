"""The command-line tool (:mod:`.main`, its grammar in :mod:`.parser`) and the runner of declared
analyses (:mod:`.analyses`)."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.cli.analyses import load_analysis, run_analysis, run_fit_job

__getattr__, __dir__, __all__ = attach(__name__, __file__)
