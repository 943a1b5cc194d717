"""The commands a simulated container interprets, and those it leaves to the pod's annotations."""

import math

import pytest

from nanokube.node.simulated_command import Program, Shell, Step, interpret, reads_stdin


@pytest.mark.parametrize("argv, program", [
    (["true"], Program((), 0, 0)),
    (["/bin/false"], Program((), 0, 1)),
    (["echo", "hi", "there"], Program(((0, "hi there\n"),), 0, 0)),
    (["echo", "-n", "hi"], Program(((0, "hi"),), 0, 0)),
    (["echo"], Program(((0, "\n"),), 0, 0)),
    (["sleep", "2"], Program((), 2, 0)),
    (["sleep", "1m", "0.5"], Program((), 60.5, 0)),
    (["sh", "-c", "exit 3"], Program((), 0, 3)),
    (["sh", "-c", "exit 300"], Program((), 0, 44)),
    (["/bin/sh", "-c", "echo start; sleep 2; echo 'all done'"], Program(((0, "start\n"), (2, "all done\n")), 2, 0)),
    (["bash", "-c", "sleep 1 && false && echo never; echo after"], Program(((1, "after\n"),), 1, 0)),
    (["sh", "-c", "false || exit 7; echo not reached"], Program((), 0, 7)),
    (["sh", "-c", "true && exit 2\necho not reached"], Program((), 0, 2)),
    (["sh", "-c", "false"], Program((), 0, 1)),
    (["sh", "-c", ""], Program((), 0, 0)),
    (["sh", "-c", "echo hi", "name", "arg"], Program(((0, "hi\n"),), 0, 0)),
    (["sleep", "infinity"], Program((), math.inf, 0)),
    (["tail", "-f", "/dev/null"], Program((), math.inf, 0)),
    (["sh", "-c", "echo up; sleep inf; echo never"], Program(((0, "up\n"),), math.inf, 0)),
    (["sh", "-c", "echo a+b c,d x=1"], Program(((0, "a+b c,d x=1\n"),), 0, 0)),  # words split at blanks only
])
def test_interpreted_commands_run_as_they_would(argv, program):
    assert interpret(argv) == program


def test_date_prints_the_time_it_runs_at_as_busybox_does():
    assert interpret(["sh", "-c", "date; sleep 61; date -u"], now=1_800_000_000) == Program(
        ((0, "Fri Jan 15 08:00:00 UTC 2027\n"), (61, "Fri Jan 15 08:01:01 UTC 2027\n")), 61, 0)
    assert interpret(["date"], now=0).output == ((0, "Thu Jan  1 00:00:00 UTC 1970\n"),)
    assert interpret(["date", "+%s"]) is None


@pytest.mark.parametrize("argv", [
    [], ["sh"], ["nginx", "-g", "daemon off;"], ["sleep"], ["exit", "3"], ["tail", "-f", "/var/log/x"],
    ["sh", "-c", "echo $HOME"], ["sh", "-c", "echo `date`"], ["sh", "-c", "echo hi > /tmp/x"],
    ["sh", "-c", "echo hi | cat"], ["sh", "-c", "sleep 10 &"], ["sh", "-c", "ls *"], ["sh", "-c", "exit x"],
    ["sh", "-c", "echo 'unterminated"], ["sh", "-c", "&& true"], ["sh", "-c", "(exit 1)"], ["python", "-c", "1"],
    ["sh", "-c", "nvidia-smi -L; sleep 9999 & wait"], ["sh", "-x", "exit 1"],
])
def test_anything_else_is_not_interpreted(argv):
    assert interpret(argv) is None


def test_a_shell_reading_stdin_runs_each_line_and_carries_its_status():
    shell = Shell()
    assert shell.line("echo hi; sleep 2; echo there", 0) == Step(((0, "stdout", "hi\n"), (2, "stdout", "there\n")),
                                                                  2, False)
    assert shell.line("false", 0) == Step((), 0, False) and shell.status == 1
    assert shell.line("", 0) == Step((), 0, False) and shell.status == 1


def test_a_command_a_shell_does_not_know_is_not_found_and_the_line_goes_on():
    shell = Shell()
    assert shell.line("ps; echo after", 0) == Step(((0, "stderr", "sh: ps: not found\n"), (0, "stdout", "after\n")),
                                                   0, False)
    shell.line("ps", 0)
    assert shell.status == 127
    assert shell.line("exit", 0) == Step((), 0, True) and shell.status == 127


def test_a_shell_line_ends_the_shell_with_exit_and_does_not_simulate_expansions():
    shell = Shell()
    assert shell.line("echo $HOME", 0).output[0][1] == "stderr" and shell.status == 2
    assert shell.line("exit 3; echo never", 0) == Step((), 0, True) and shell.status == 3


@pytest.mark.parametrize("argv, image, shell", [
    (["sh"], "", True), (["/bin/bash"], "ubuntu", True), (["sh", "-c", "echo"], "busybox", False),
    ([], "busybox", True), ([], "docker.io/library/alpine:3.20", True), ([], "nginx", False),
    (["cat"], "busybox", False),
])
def test_which_containers_run_a_shell_on_their_stdin(argv, image, shell):
    assert reads_stdin(argv, image) is shell
