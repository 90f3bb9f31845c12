"""Shared utilities: staged output folders, parallel execution, progress bars."""
