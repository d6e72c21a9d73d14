"""The command line: one version source, and help text on every flag of every subcommand."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import version

import pysched
from pysched.cli import build_parser


def test_version_has_one_source():
    assert version("pysched") == pysched.__version__
    out = subprocess.run([sys.executable, "-m", "pysched", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"pysched {pysched.__version__}"


def test_every_flag_has_help():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, sub in subparsers.choices.items() for a in sub._actions
               if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert not missing, f"flags without help text: {missing}"


def test_podgroup_controller_flag():
    from pysched.cli import parse_args
    assert parse_args([]).podgroup_controller == "auto"
    assert parse_args(["--podgroup-controller=off"]).podgroup_controller == "off"
    import pytest
    with pytest.raises(SystemExit):
        parse_args(["--podgroup-controller=maybe"])
