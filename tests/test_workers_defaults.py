"""Where replicates run by default is said once per command and said the same everywhere: the declared
default of each job's ``workers`` option, its ``--help`` text and the paragraph of docs/guide/scaling.md agree."""

import re
from pathlib import Path

from bayesirt.cli.parser import COMMANDS, build_parser, command_job
from bayesirt.utils.options import options_of

README = Path(__file__).resolve().parents[1] / "docs" / "guide" / "scaling.md"


def _workers_help(command: str) -> str:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if getattr(a, "choices", None) and command in a.choices).choices[command]
    action = next(a for a in sub._actions if "--workers" in a.option_strings)
    return action.help % {"default": action.default} if "%(" in (action.help or "") else action.help or ""


def test_declared_defaults_help_and_readme_agree():
    text = " ".join(README.read_text().split())
    para = text[text.index("Where independent replicates run by default"):]
    in_process_part, rest = para.split("run in the calling process", 1)
    per_core_part = rest.split("start a local Dask cluster of one single-threaded process per core", 1)[0]
    named = lambda part: {c for c in re.findall(r"`([a-z-]+)`", part) if c in COMMANDS}  # noqa: E731
    in_process, per_core = named(in_process_part), named(per_core_part)
    seen = set()
    for command in COMMANDS:
        declared = options_of(command_job(command)).get("workers")
        if declared is None:
            continue
        seen.add(command)
        shown = _workers_help(command)
        if declared.default is None:
            assert command in per_core and "[one per core]" in shown, (command, shown)
        else:
            assert declared.default == 1 and command in in_process and shown.rstrip().endswith("[1]"), (command, shown)
    assert seen == in_process | per_core and {"audit", "sandbag", "cat"} <= seen
