"""Sphinx extension: ``_generated/cli.md``, the command-line reference, written at build time from the parser
(:mod:`bayesirt.cli.parser`) and the options' declarations, so it lists every command and every option with its
default and range as the code declares them."""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesirt.cli.parser import COMMANDS, READ_GROUP, build_parser, cli_options, command_job
from bayesirt.data.settings import READ_OPTIONS


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _range(opt) -> str:
    if opt is None:
        return ""
    if opt.choices:
        return "one of " + ", ".join(f"`{c}`" for c in opt.choices)
    if opt.low is None and opt.high is None:
        return ""
    left_open = opt.open is True or opt.open == "low"
    right_open = opt.open is True or opt.open == "high"
    low = "-inf" if opt.low is None else opt.low
    high = "inf" if opt.high is None else opt.high
    return f"{'(' if left_open or opt.low is None else '['}{low}, {high}{')' if right_open or opt.high is None else ']'}"


def _default(action, opt) -> str:
    if opt is not None:
        if opt.required:
            return "required"
        value = opt.default
    elif action.required:
        return "required"
    else:
        value = None if action.default is argparse.SUPPRESS else action.default
    if isinstance(value, bool) or action.nargs == 0:
        return "off" if action.nargs == 0 else str(value)
    if isinstance(value, (tuple, list)):
        value = ",".join(str(v) for v in value)
    return "unset" if value is None else f"`{value}`"


def _subparsers(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def command_section(name: str, sub: argparse.ArgumentParser, helps: dict) -> list[str]:
    options = {}
    if name in COMMANDS:
        options = dict(cli_options(command_job(name)))
    lines = [f"## `bayesirt {name}`", "", _cell(helps.get(name, sub.description or "")), "", "```text",
             sub.format_usage().strip(), "```", ""]
    positionals = [a for a in sub._actions if not a.option_strings]
    if positionals:
        lines += ["| argument | meaning |", "|---|---|"]
        lines += [f"| `{a.dest.upper() if a.dest != 'inputs' else 'INPUTS ...'}` | {_cell(a.help or '')} |"
                  for a in positionals]
        lines.append("")
    groups = [(g.title, g._group_actions) for g in sub._action_groups if g._group_actions]
    for title, actions in groups:
        rows = [a for a in actions if a.option_strings and a.help != argparse.SUPPRESS and "-h" not in a.option_strings]
        if not rows:
            continue
        lines += [f"{'Reading options' if title == READ_GROUP else 'Options'} ({_cell(title)}):", "",
                  "| option | default | range | meaning |", "|---|---|---|---|"]
        for a in rows:
            opt = READ_OPTIONS.get(a.dest) if title == READ_GROUP else options.get(a.dest)
            flag = ", ".join(f"`{s}`" for s in a.option_strings) + (f" `{a.metavar}`" if a.metavar else "")
            text = (a.help or "").replace("%%", "%")
            lines.append(f"| {flag} | {_default(a, opt)} | {_range(opt)} | {_cell(text)} |")
        lines.append("")
    return lines


def write(app) -> None:
    parser = build_parser()
    helps = {name: help_text for name, (_, help_text) in COMMANDS.items()}
    top = _subparsers(parser)
    helps |= {a.dest: a.help for a in next(a for a in parser._actions
                                            if isinstance(a, argparse._SubParsersAction))._choices_actions}
    lines = ["# Command-line reference", "",
             "Generated at build time from the command line's parser and the options' declarations "
             "(`bayesirt.utils.options`): every command, every option, its default and its allowed range. "
             "The same names with underscores are the keys of an analysis file's tables and the keywords of the "
             "Python jobs (`bayesirt.jobs`).", "",
             f"{len(top)} commands: " + ", ".join(f"`{c}`" for c in top), ""]
    for name in top:
        sub = _subparsers(build_parser((name,)))[name] if name in COMMANDS else top[name]
        lines += command_section(name, sub, helps)
    out = Path(app.srcdir) / "_generated" / "cli.md"
    out.parent.mkdir(exist_ok=True)
    text = "\n".join(lines) + "\n"
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


def setup(app):
    app.connect("builder-inited", write)
    return {"parallel_read_safe": True, "version": "1"}
