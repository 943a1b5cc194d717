"""`nanokube`'s command dispatch: a command imports only its own module, while help and
usage still name every command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nanokube.cli import COMMANDS, main

NAMES = ["up", *COMMANDS]


def test_a_command_imports_only_its_own_module():
    code = ("import sys\nfrom nanokube.cli import main\ntry:\n    main(['simulate', '--help'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.startswith(('nanokube.cli', 'nanokube.scheduler', "
            "'nanokube.apiserver', 'uvloop'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "['nanokube.cli', 'nanokube.cli_simulate']"


@pytest.mark.parametrize("argv", [["--help"], ["up", "--help"], ["scheduler", "--help"]])
def test_help_names_every_command_or_the_one_asked_for(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    if argv[0] == "--help":
        assert all(f"    {n} " in out for n in NAMES), out
    else:
        assert out.startswith(f"usage: nanokube {argv[0]} ")


@pytest.mark.parametrize("argv", [["bogus"], ["up", "--port", "1", "extra"], []])
def test_usage_names_every_command(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "{" + ",".join(NAMES) + "}" in err, err
