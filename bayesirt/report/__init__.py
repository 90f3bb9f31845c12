"""Reports of bayesirt runs: Markdown sections, figures (PNG) and the writers of output folders."""

from typing import TYPE_CHECKING

from bayesirt.utils.lazy import attach

if TYPE_CHECKING:
    from bayesirt.report.figures import plot_ability_forest, plot_item_curves
    from bayesirt.report.markdown import fit_report, markdown_table

__getattr__, __dir__, __all__ = attach(__name__, __file__)
