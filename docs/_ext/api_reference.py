"""Sphinx extension: ``_generated/api/``, the API reference, written at build time by walking the package: one
page per subpackage, and on it one section per module with an autosummary table of its public names (its
``__all__``, else the functions, classes and constants it defines without a leading underscore) and their
documentation from the numpydoc docstrings. A name re-exported by a package is documented once, in the module
that defines it; the package's table links there."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import bayesirt

#: Modules that are not API: the command line's entry point (documented by the CLI reference).
SKIP = ("bayesirt.__main__",)


def public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(module).items() if not n.startswith("_")
                 and (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__]
    return list(names)


def escape_bars(text: str) -> str:
    """``|x|`` (an absolute value, a difference) outside ````literals```` made literal bars, not substitutions."""
    parts = re.split(r"(``.*?``)", text)
    return "".join(p if p.startswith("``") else p.replace("|", "\\|") for p in parts)


def summary(obj) -> str:
    """The first sentence of ``obj``'s docstring (never cut inside a literal), bars escaped."""
    doc = inspect.getdoc(obj) or ""
    if not doc or obj.__doc__ is None or (not callable(obj) and type(obj).__doc__ == obj.__doc__):
        return ""
    first = " ".join(doc.split("\n\n")[0].split())
    for m in re.finditer(r"\.(?:\s|$)", first):
        if first[: m.start()].count("``") % 2 == 0 and first[: m.start()].count("`") % 2 == 0:
            first = first[: m.end()].strip()
            break
    return escape_bars(first)


def bars_in_docstrings(app, what, name, obj, options, lines) -> None:
    """autodoc-process-docstring: bars as text outside literals and tables (docstrings write ``|a - b|``)."""
    literal = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.endswith("::"):
            literal = True
            continue
        if literal and stripped and not line.startswith(" "):
            literal = False
        if not literal and not stripped.startswith(("|", "+", "=")):
            lines[i] = escape_bars(line)


def modules() -> list[str]:
    found = ["bayesirt"]
    for info in pkgutil.walk_packages(bayesirt.__path__, "bayesirt."):
        if info.name not in SKIP and not any(part.startswith("_") for part in info.name.split(".")[1:]):
            found.append(info.name)
    return sorted(found)


def home(obj, fallback: str) -> str:
    """The module that defines ``obj`` (where it is documented)."""
    return getattr(obj, "__module__", None) or fallback


def module_section(name: str, documented: dict) -> list[str]:
    module = importlib.import_module(name)
    names = public_names(module)
    title = f"``{name}``"
    lines = [title, "-" * len(title), "", f".. automodule:: {name}", "   :no-members:", ""]
    if not names:
        return lines
    own, linked = [], []
    for n in names:
        obj = getattr(module, n)
        where = home(obj, name) if (inspect.isfunction(obj) or inspect.isclass(obj)) else name
        if where == name or documented.get(f"{where}.{n}") is None and not where.startswith("bayesirt"):
            own.append(n)
        else:
            linked.append((n, where))
    if own:
        lines += [".. list-table::", "   :widths: 30 70", ""]
        for n in own:
            lines += [f"   * - :obj:`~{name}.{n}`", f"     - {summary(getattr(module, n))}"]
        lines.append("")
    if linked:
        lines += ["Also here, documented where they are defined: " +
                  ", ".join(f":obj:`~{w}.{n}`" for n, w in linked) + ".", ""]
    for n in own:
        obj = getattr(module, n)
        kind = "autoclass" if inspect.isclass(obj) else "autofunction" if callable(obj) else "autodata"
        lines += [f".. {kind}:: {name}.{n}", *(["   :members:"] if kind == "autoclass" else []), ""]
        documented[f"{name}.{n}"] = True
    return lines


def write(app) -> None:
    out = Path(app.srcdir) / "_generated" / "api"
    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[str]] = {}
    for name in modules():
        top = ".".join(name.split(".")[:2])
        groups.setdefault(top, []).append(name)
    documented: dict = {}
    pages = {}
    for top, names in sorted(groups.items(), key=lambda kv: (kv[0] != "bayesirt", kv[0])):
        lines = [f"{top}", "=" * len(top), ""]
        for name in sorted(names, key=lambda n: (n != top, n)):
            lines += module_section(name, documented)
        pages[f"{top}.rst"] = "\n".join(lines) + "\n"
    index = ["API reference", "=============", "",
             "Generated at build time from the package: every public name of every module, with its numpydoc "
             "docstring. The top-level names (``import bayesirt as bi``) are listed first.", "",
             ".. toctree::", "   :maxdepth: 1", "", *[f"   {p.removesuffix('.rst')}" for p in pages], ""]
    pages["index.rst"] = "\n".join(index)
    for file, text in pages.items():
        target = out / file
        if not target.exists() or target.read_text() != text:
            target.write_text(text)


def setup(app):
    app.connect("builder-inited", write)
    app.connect("autodoc-process-docstring", bars_in_docstrings)
    return {"parallel_read_safe": True, "version": "1"}
