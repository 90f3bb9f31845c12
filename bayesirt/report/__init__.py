"""Reports of bayesirt runs: Markdown, figures (PNG) and machine-readable summaries."""

from bayesirt.report.figures import plot_ability_forest, plot_item_curves
from bayesirt.report.markdown import fit_report, markdown_table

__all__ = ["fit_report", "markdown_table", "plot_ability_forest", "plot_item_curves"]
