"""`nanokube`'s command dispatch: a command imports only its own module, while help and
usage still name every command."""

from __future__ import annotations

import re
import subprocess
import sys
import threading

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


@pytest.mark.parametrize("argv", [["fault", "node", "n1", "--clear"], ["metrics", "get", "queue-depth"]])
def test_the_client_commands_log_as_the_components_do(argv, tmp_path):
    """fault and metrics take the logging flags after their action, refuse them in the same words as
    the components, and log in klog's text form or component-base's JSON."""
    refused = subprocess.run([sys.executable, "-m", "nanokube.cli", *argv, "--logging-format", "xml"],
                             capture_output=True, text=True)
    assert (refused.returncode, refused.stderr) == (
        2, f"nanokube {argv[0]}: --logging-format: Unsupported log format 'xml' (supported: text, json)\n")
    kc = tmp_path / "kubeconfig"  # a server of no port: the command fails without reaching anything
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                  "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                  "current-context: x\n")
    code = ("import logging, sys\nfrom nanokube.cli import main\nmain(sys.argv[1:])\n"
            "logging.getLogger('nanokube.test').debug('at V(4)')\nlogging.getLogger('nanokube.test').warning('a record')")
    for flags, form in ((["-v", "4"], r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ <string>:4\] at V\(4\)\n"
                                      r"W\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ <string>:5\] a record\n"),
                        (["--logging-format=json"], r'\{"ts":[\d.]+,"caller":"<string>:5","msg":"a record","v":0\}\n')):
        got = subprocess.run([sys.executable, "-c", code, *argv, "--kubeconfig", str(kc), *flags],
                             capture_output=True, text=True)
        assert re.search(form + "$", got.stderr), got.stderr


def test_a_record_is_on_stderr_at_once_whatever_the_log_flush_frequency(tmp_path):
    """--log-flush-frequency is validated and ignored, as upstream ignores it for a logging backend
    that does not buffer: a record is out while the process still runs, long before 1h."""
    code = ("import logging, sys\nfrom nanokube.cli import main\nmain(sys.argv[1:])\n"
            "logging.getLogger('nanokube.test').warning('written at once')\nsys.stdin.readline()")
    proc = subprocess.Popen([sys.executable, "-c", code, "fault", "node", "n1", "--clear", "--kubeconfig",
                             str(tmp_path / "none"), "--log-flush-frequency", "1h"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, proc.kill)  # (a record never written: the read below ends with it)
    watchdog.start()
    try:
        while "written at once" not in (line := proc.stderr.readline()):
            assert line, "no record before the process ended"
        assert proc.poll() is None, "the record came only as the process ended"
    finally:
        watchdog.cancel()
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stderr.close()
    assert proc.returncode == 0


def test_the_soft_limit_on_open_files_is_raised_to_the_hard_one():
    """fuzz65: as Go's runtime does for kube-apiserver, so that a shell's 1024 does not cap the
    connections a server takes (1,100 that sent nothing made the API server refuse every other client)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    code = ("import resource\nfrom nanokube.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))).stdout
    assert out.splitlines()[-1] == str((hard, hard))
