"""Lazy public names of a package (PEP 562): ``import bayesirt`` stays fast, and a name's module
(with PyMC, ArviZ, ...) is imported the first time the name is used.

A package declares its public names as ordinary imports inside ``if TYPE_CHECKING:`` (what
readers, type checkers and the architecture test see) and calls :func:`attach`, which reads
those imports from the package's own source and serves them on first access.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

__all__ = ["attach"]


def _declared(path: str) -> dict[str, str]:
    """Name -> defining module of every ``from X import name`` under ``if TYPE_CHECKING:`` in ``path``."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                    names.update({alias.asname or alias.name: stmt.module for alias in stmt.names})
    return names


def attach(package: str, path: str):
    """``(__getattr__, __dir__, __all__)`` for the package ``package`` whose ``__init__`` is ``path``."""
    declared = _declared(path)

    def __getattr__(name: str):
        module = declared.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(sys.modules[package].__dict__) | set(declared))

    return __getattr__, __dir__, sorted(declared)
