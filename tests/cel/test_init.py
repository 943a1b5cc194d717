"""nanokube.cel's import of the engine: the engine's command line is loaded only once it is used."""

from __future__ import annotations

import subprocess
import sys


def test_the_engine_loads_its_command_line_only_when_used():
    code = ("import sys\nimport nanokube.cel\nimport cel\n"
            "print(cel.evaluate('1 + 2', {}), 'typer' in sys.modules, 'prompt_toolkit' in sys.modules)\n"
            "print(callable(cel.cli.main), 'typer' in sys.modules, cel.cli is sys.modules['cel.cli'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["3 False False", "True True True"]
