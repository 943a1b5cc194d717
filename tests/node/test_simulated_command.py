"""The commands a simulated container interprets, and those it leaves to the pod's annotations."""

import itertools
import math

import pytest

from nanokube.clock import Clock
from nanokube.node.simulated_applets import Terminal
from nanokube.node.simulated_command import (Program, Shell, Step, interpret, outlives_sigterm, reads_stdin,
                                             written_so_far)
from nanokube.node.simulated_fs import PodFiles
from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import node_agents, phase_is, pod


@pytest.fixture
def pod_files(tmp_path):
    return PodFiles({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main"}]}},
                    lambda name: str(tmp_path / name), Clock())


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
    assert interpret(["date", "+%s"], now=1_800_000_000).output == ((0, "1800000000\n"),)
    assert interpret(["sh", "-c", "date -u '+%F %T %Z'"], now=0).output == ((0, "1970-01-01 00:00:00 UTC\n"),)
    assert interpret(["date", "+%Q"]) is None  # a conversion busybox's date does not know


@pytest.mark.parametrize("argv", [
    [], ["nginx", "-g", "daemon off;"], ["sleep"], ["exit", "3"], ["tail", "-f", "/var/log/x"],
    ["sh", "-c", "echo $-"], ["sh", "-c", "echo `date`"], ["sh", "-c", "echo hi > /tmp/x"],
    ["sh", "-c", "echo hi | cat"], ["sh", "-c", "echo hi | cat &"], ["sh", "-c", "ls *"], ["sh", "-c", "exit x"],
    ["sh", "-c", "echo 'unterminated"], ["sh", "-c", "&& true"], ["sh", "-c", "(exit 1)"], ["python", "-c", "1"],
    ["sh", "-c", "nvidia-smi -L; sleep 9999 & wait"], ["sh", "-x", "exit 1"],
])
def test_anything_else_is_not_interpreted(argv):
    assert interpret(argv) is None


def test_a_bare_shell_runs_its_stdin_and_with_none_exits_at_once():
    """`sh` alone reads its script from stdin: a container's with no stdin (/dev/null) reads EOF and
    exits 0 at once, as a busybox image run with no command does; its stdin's lines run as a
    script; one whose stdin is still to come (`stdin: true`, None here) is not worked out ahead."""
    program = interpret(["sh"], stdin=b"")
    assert (program.output, program.seconds, program.exit_code) == ((), 0.0, 0)
    program = interpret(["sh"], stdin=b"echo hi\nexit 3\necho never\n")
    assert (program.output, program.exit_code) == (((0.0, "hi\n"),), 3)
    assert interpret(["sh"], stdin=None) is None


def test_wait_waits_for_the_background_sleeps_and_a_trapped_sigterm_cuts_it_short():
    """`sleep N &` is a job `wait` waits for (the shell exits at once without a wait); SIGTERM
    (`Program.signalled`) ends a wait at once where TERM is trapped (its trap runs then, the wait's
    status 143), as a shell's wait is interrupted where a foreground sleep is waited out."""
    assert interpret(["sh", "-c", "sleep 10 &"]) == Program((), 0, 0)
    waited = interpret(["sh", "-c", "sleep 3 & sleep 5 & wait; echo $?"])
    assert (waited.output, waited.seconds) == (((5, "0\n"),), 5)
    trapped = interpret(["sh", "-c", "trap 'echo bye' TERM; sleep infinity & wait; echo $?"])
    assert math.isinf(trapped.seconds)
    later = trapped.signalled(2.5, None)
    assert (later.output, later.seconds, later.exit_code) == (((2.5, "bye\n"), (2.5, "143\n")), 2.5, 0)
    untrapped = interpret(["sh", "-c", "sleep 9 & wait; echo done"]).signalled
    assert untrapped is None  # no TERM trap: the signal changes nothing


def test_wait_for_a_pid_waits_for_that_job_alone():
    """`$!` is the last background job's PID (unset before one); `wait PID` waits for that job
    only, its status 0 (again for a job waited for before), and 127 for a PID that is no job of
    the shell's, with nothing said, as busybox's ash and dash do."""
    assert interpret(["sh", "-c", 'echo "[$!]"; sleep 1 & echo $!']).output == ((0, "[]\n"), (0, "7\n"))
    script = "sleep 8 & long=$!; sleep 2 & wait $!; echo $? at 2; wait $long; echo $?; wait $long 2; echo $?"
    waited = interpret(["sh", "-c", script])
    assert (waited.output, waited.seconds) == (((2, "0 at 2\n"), (8, "0\n"), (8, "127\n")), 8)
    trapped = interpret(["sh", "-c", "trap 'echo bye; exit 0' TERM; sleep 1 & sleep infinity & wait $!"])
    assert math.isinf(trapped.seconds)
    assert trapped.signalled(3, None).output == ((3, "bye\n"),)
    assert interpret(["sh", "-c", "sleep 1 & wait %1"]) is None  # a job spec is not simulated


def test_a_background_command_that_writes_nothing_once_started_is_a_job():
    """`tail -f /dev/null &` (the keep-alive that lets a TERM trap run at once) is a job that never
    ends; one that ends at once (`echo`, a command not found) writes as it starts and `wait $!`
    has its status. One that would change the shell (`cd`, `exit`, an assignment), or write
    later, on into what the shell goes on with (test_simulated_net: `ping -c 2`), is not simulated."""
    kept = interpret(["sh", "-c", "trap 'echo bye; exit 0' TERM; tail -f /dev/null & wait"])
    assert math.isinf(kept.seconds)
    assert kept.signalled(4, None).output == ((4, "bye\n"),)
    quick = interpret(["sh", "-c", "echo hi & nosuch & wait $!; echo $?"], not_found=True)
    assert (quick.output, quick.errors, quick.seconds) == (((0, "hi\n"), (0, "127\n")),
                                                           ((1, 0, "sh: nosuch: not found\n"),), 0)
    for script in ("cd /tmp &", "exit 3 &", "x=1 &"):
        assert interpret(["sh", "-c", script]) is None, script


def test_tty_and_stty_size_read_the_terminal_the_command_runs_on():
    """busybox: `tty` names the terminal or prints `not a tty` (status 1; `-s` only the status);
    `stty size` is its rows and columns as last resized, and fails its ioctl without one."""
    terminal = Terminal(rows=40, columns=100)
    assert interpret(["sh", "-c", "tty; stty size"], terminal=terminal).output == ((0, "/dev/pts/0\n"), (0, "40 100\n"))
    assert interpret(["tty"]) == Program(((0, "not a tty\n"),), 0, 1)
    assert interpret(["sh", "-c", "tty -s || echo $?"]).output == ((0, "1\n"),)
    assert interpret(["stty", "size"]) == Program((), 0, 1, ((0, 0, "stty: standard input: Inappropriate ioctl for device\n"),))
    shell = Shell(terminal=terminal)
    terminal.resized(132, 43)
    assert shell.line("stty size", 0) == Step(((0, "stdout", "43 132\n"),), 0, False)
    assert interpret(["stty", "-a"], terminal=terminal) is None  # only `size` is simulated


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
    assert shell.line("echo $-", 0).output[0][1] == "stderr" and shell.status == 2
    assert shell.line("exit 3; echo never", 0) == Step((), 0, True) and shell.status == 3


@pytest.mark.parametrize("argv, image, shell", [
    (["sh"], "", True), (["/bin/bash"], "ubuntu", True), (["sh", "-c", "echo"], "busybox", False),
    ([], "busybox", True), ([], "docker.io/library/alpine:3.20", True), ([], "nginx", False),
    (["cat"], "busybox", False),
])
def test_which_containers_run_a_shell_on_their_stdin(argv, image, shell):
    assert reads_stdin(argv, image) is shell


ENV = {"PATH": "/bin", "HOSTNAME": "trainer", "HOME": "/root", "MY_VAR": "hello  world"}


@pytest.mark.parametrize("script, out", [
    ('echo $MY_VAR "$MY_VAR" ${HOSTNAME}', "hello world hello  world trainer\n"),  # unquoted: split at blanks
    ("echo ${NOPE:-fallback} ${NOPE-x} ${HOME:+set} ${#HOME}", "fallback x set 5\n"),
    ("echo '$MY_VAR' \\$HOME", "$MY_VAR $HOME\n"),  # quoted or escaped: not expanded
    ("A=1; B=$A$A; echo $B; false; echo $?", "11\n1\n"),
    ("echo $0 $1 $# \"$@\"", "sh 0 \n"),
    ("echo $((2 + 3 * 4)) $(( (7 / 2) % 2 )) $((1 < 2 && 0))", "14 1 0\n"),
    ("printenv HOME; export X=1; env", "/root\nPATH=/bin\nHOSTNAME=trainer\nHOME=/root\nMY_VAR=hello  world\nX=1\n"),
    ("Y=2 printenv Y; echo \"[$Y]\"; unset HOME; printenv HOME; echo $?", "2\n[]\n1\n"),
    ("echo $(echo a   b) \"$(echo c; echo)\"", "a b c\n"),
    ("p=/a/b.tar.gz; echo ${p%.*} ${p%%.*} ${p#*/} ${p##*/} ${p%'.*'} \"${p%.[gt]*}\" ${NOPE%x}.",
     "/a/b.tar /a/b a/b.tar.gz b.tar.gz /a/b.tar.gz /a/b.tar .\n"),  # quoted pattern text is literal
    ("f() { echo \"$# $1\"; return 4; }; f 'a b' c; echo $? $#", "2 a b\n4 0\n"),
    ("n() { local x=in; echo $x; }; x=out; n; echo $x; g() { echo g; }; g; g", "in\nout\ng\ng\n"),
])
def test_a_shell_expands_its_variables_and_the_environment(script, out):
    program = interpret(["sh", "-c", script], env=ENV)
    assert "".join(x for _, x in program.output) == out and program.exit_code == 0


def test_the_arguments_after_the_script_are_its_positional_parameters():
    assert interpret(["sh", "-c", 'echo "$0:$1:$2:$#"', "name", "a b", "c"]).output == ((0, "name:a b:c:2\n"),)


@pytest.mark.parametrize("script, output, seconds, code", [
    ("for i in 1 2 3; do echo step $i; sleep 1; done; exit 4", ((0, "step 1\n"), (1, "step 2\n"), (2, "step 3\n")),
     3, 4),
    ("for i in a b c; do if [ $i = b ]; then continue; fi; echo $i; done", ((0, "a\n"), (0, "c\n")), 0, 0),
    ("i=0; while [ $i -lt 3 ]; do i=$((i+1)); echo $i; sleep 2; done", ((0, "1\n"), (2, "2\n"), (4, "3\n")), 6, 0),
    ("n=0; until [ $n -ge 2 ]; do n=$((n+1)); done; echo $n", ((0, "2\n"),), 0, 0),
    ("while true; do echo once; break; done; echo $?", ((0, "once\n"), (0, "0\n")), 0, 0),
    ("for i in 1 2; do for j in 1 2; do [ $j = 2 ] && break 2; echo $i$j; done; done", ((0, "11\n"),), 0, 0),
    ("if false; then echo a; elif [ -d /tmp ]; then echo b; else echo c; fi", ((0, "b\n"),), 0, 0),
    ("if [ -f /nope ]; then echo yes\nelse\n  echo no; exit 2\nfi", ((0, "no\n"),), 0, 2),
    ("for i in $(seq 1 3); do sleep 1; done; exit $i", (), 3, 3),
    ("while true; do sleep 1; exit 7; done", (), 1, 7),
    ("while true; do :; done", (), math.inf, 0),
    ("while true; do sleep 5; done; echo never", (), math.inf, 0),
])
def test_loops_and_conditionals_run_as_a_shell_runs_them(pod_files, script, output, seconds, code):
    program = interpret(["sh", "-c", script], 0, pod_files.draft("main"))
    assert (program.output, program.seconds, program.exit_code) == (output, seconds, code)


def test_an_endless_loop_writes_on_its_clock_each_pass_worked_out_as_it_comes():
    """`while true; do date; echo step; sleep 5; done` runs forever: its passes repeat from the
    second on, each worked out only when asked for (the date it prints is that pass's)."""
    program = interpret(["sh", "-c", "echo start; while true; do date; echo step; sleep 5; done"], 1_800_000_000)
    assert program.seconds == math.inf and program.exit_code == 0
    writes = list(itertools.islice(program.timeline(), 7))
    assert writes == [(0, "stdout", "start\n"), (0, "stdout", "Fri Jan 15 08:00:00 UTC 2027\n"), (0, "stdout", "step\n"),
                      (5, "stdout", "Fri Jan 15 08:00:05 UTC 2027\n"), (5, "stdout", "step\n"),
                      (10, "stdout", "Fri Jan 15 08:00:10 UTC 2027\n"), (10, "stdout", "step\n")]
    assert list(itertools.islice(program.timeline(), 20002, 20003)) == [(50000, "stdout", "step\n")]


@pytest.mark.parametrize("script, output", [
    ("mkdir -p /ckpt && touch /ckpt/a.pt /ckpt/b.pt; P='/ckpt/*.pt'; ls $P", "/ckpt/a.pt\n/ckpt/b.pt\n"),
    ("mkdir -p /ckpt && touch /ckpt/a.pt; for f in $(echo '/ckpt/*'); do echo $f; done", "/ckpt/a.pt\n"),
    ("mkdir -p /ckpt && touch /ckpt/a.pt; P='/ckpt/*'; echo \"$P\" ${P}.none", "/ckpt/* /ckpt/*.none\n"),
])
def test_the_globs_an_unquoted_expansion_gives_match_filenames(pod_files, script, output):
    """As a shell's pathname expansion: the `*` in a variable's or a substitution's unquoted value
    matches the container's files as one written in the word does; a quoted value, or one whose
    pattern matches nothing, stays as it is."""
    program = interpret(["sh", "-c", script], 0, pod_files.draft("main"))
    assert ("".join(x for _, x in program.output), program.exit_code) == (output, 0)


@pytest.mark.parametrize("script", [
    "while true; do echo flood; done", "i=0; while true; do i=$((i+1)); echo $i; done",  # without end at one instant
    "while [ -d /tmp ]; do echo x >> /tmp/log; sleep 1; done",  # may end, and never repeats itself
    "while true; do echo x; sleep 1; done | cat",  # an endless command in a pipe
    "f() echo hi", "echo ~/x",  # a function whose body is no compound command
])
def test_what_cannot_be_worked_out_is_not_interpreted(pod_files, script):
    assert interpret(["sh", "-c", script], 0, pod_files.draft("main")) is None


def test_a_shell_keeps_its_variables_and_waits_for_the_end_of_a_command_over_lines():
    shell = Shell(env=ENV)
    assert shell.line("X=1; export Y=2", 0) == Step((), 0, False)
    assert shell.line("echo $X$Y $HOSTNAME", 0) == Step(((0, "stdout", "12 trainer\n"),), 0, False)
    assert shell.line("for i in 1 2; do", 0) == Step((), 0, False) and shell.prompt() == "> "
    assert shell.line("echo $i; sleep 1; done", 0) == Step(((0, "stdout", "1\n"), (1, "stdout", "2\n")), 2, False)
    assert shell.prompt() == "/ # "
    step = shell.line("while true; do echo tick; sleep 2; done", 0)
    assert step.seconds == math.inf and list(itertools.islice(step.output, 3)) == [
        (0, "stdout", "tick\n"), (2, "stdout", "tick\n"), (4, "stdout", "tick\n")]


@pytest.mark.parametrize("script, stdin, writes, code", [
    ("set -e; echo a; false; echo never", b"", [("stdout", "a\n")], 1),
    ("set -e; if false; then :; fi; false || true; ! true; while false; do :; done; echo ok", b"",
     [("stdout", "ok\n")], 0),
    ("set -ex; A=1 echo 'a b'; B=2", b"", [("stderr", "+ A=1 echo 'a b'\n"), ("stdout", "a b\n"),
                                          ("stderr", "+ B=2\n")], 0),
    ("set -o pipefail; false | true; echo $?; set +o pipefail; false | true; echo $?", b"",
     [("stdout", "1\n"), ("stdout", "0\n")], 0),
    ("set -u; echo ${NOPE:-ok}; echo $NOPE; echo never", b"", [("stdout", "ok\n"),
                                                               ("stderr", "sh: NOPE: parameter not set\n")], 2),
    ("set -- p q; echo $# $2", b"", [("stdout", "2 q\n")], 0),
    ('while read a b; do echo "[$a][$b]"; done', b"x y z\n  p  \nno newline",
     [("stdout", "[x][y z]\n"), ("stdout", "[p][]\n")], 0),
    ("read -r x; echo $x $?; read y; echo $? \"$y\"", b"a\\b\n", [("stdout", "a\\b 0\n"), ("stdout", "1 \n")], 0),
])
def test_set_options_and_read(script, stdin, writes, code):
    program = interpret(["sh", "-c", script], stdin=stdin)
    assert [(stream, x) for _, stream, x in program.writes()] == writes and program.exit_code == code


def test_read_of_a_stdin_still_to_come_is_not_worked_out_ahead():
    assert interpret(["sh", "-c", "read x; echo $x"], stdin=None) is None


@pytest.mark.parametrize("script, sent, writes", [
    ("while read l; do echo got:$l; done", b"a\nb", ([(0.0, "stdout", "got:a\n")], False)),  # b's line to end
    ("echo start; sleep 2; printf 'x\\n' >&2; wc -l", b"a\n",
     ([(0.0, "stdout", "start\n"), (2.0, "stderr", "x\n")], True)),
    ("echo s; while read l; do echo $l; done | tr a b", b"a\n", ([(0.0, "stdout", "s\n")], False)),  # at its end
    ("echo s; x=$(cat); echo $x", b"a\n", ([(0.0, "stdout", "s\n")], True)),
    ("read l; echo $l", b"a\n", None),  # it ends, the rest never read
    ("cat; exit 3", b"", ([], True)),
])
def test_what_a_script_on_an_open_stdin_has_written_before_it_waits_for_more(pod_files, script, sent, writes):
    """`kubectl run -i -- sh -c SCRIPT`: what it writes before a read waits for more of its stdin,
    and whether that read waits for the EOF (None where it ends before); what goes into a pipe
    or `$(...)` comes when the list ends."""
    assert written_so_far(["sh", "-c", script], 0.0, lambda: pod_files.container("main"), sent) == writes


@pytest.mark.parametrize("args, out, code", [(["train"], "training\n", 0), (["eval-1"], "evaluating\n", 0),
                                             (["x.pt"], "a checkpoint\n", 0), ([], "usage\n", 2)])
def test_case_runs_the_list_of_the_first_pattern_that_matches(args, out, code):
    script = ('case "$1" in\n  train|fit) echo training ;;\n  eval*) echo evaluating ;;\n'
              "  (*.pt|[!a-z]) echo a checkpoint ;;\n  *) echo usage; exit 2 ;;\nesac")
    program = interpret(["sh", "-c", script, "entrypoint", *args])
    assert ("".join(x for _, x in program.output), program.exit_code) == (out, code)


def test_a_pattern_is_a_glob_only_in_case():
    assert interpret(["sh", "-c", 'A=*; echo "$A"; case "*" in "*") echo quoted;; esac']).output == (
        (0, "*\n"), (0, "quoted\n"))
    assert interpret(["sh", "-c", "echo /data/*.pt"]) is None  # no files to match it against


def test_a_loop_that_cannot_end_and_does_not_repeat_itself_is_worked_out_as_its_passes_come(pod_files):
    """`while true` with a counter: each pass differs, so no pass repeats an earlier one; the loop
    cannot end (no break, exit or set in it), so after its first passes the rest are run as they
    are asked for, the files it changes with them."""
    program = interpret(["sh", "-c", 'i=0; while true; do echo "step $i" >> /tmp/log; echo "step $i"; '
                                     "i=$((i+1)); sleep 1; done"], 0, pod_files.draft("main"))
    assert program.seconds == math.inf and len(program.output) < 100
    writes = [e for e in itertools.islice(program.timeline(), 6000) if e[1] == "stdout"]
    assert writes[:2] == [(0, "stdout", "step 0\n"), (1, "stdout", "step 1\n")]
    assert writes[-1] == (1999, "stdout", "step 1999\n")  # 3 events a pass: 2 changes (open, write), 1 line
    changes = [e[2] for e in itertools.islice(program.timeline(), 6000) if e[1] == "files"]
    assert changes[-1][0] == 1999 and changes[-1][2] == ("/tmp/log", b"step 1999\n")


@pytest.mark.parametrize("script, seconds, output", [
    ("i=0; while true; do i=$((i+1)); [ $i -gt 70 ] && break; sleep 1; done; echo out $i", 70, ((70, "out 71\n"),)),
    ("n=0; while :; do n=$((n+1)); done; echo never", math.inf, ()),  # spins, silent, forever
])
def test_a_loop_with_a_counter_that_ends_or_spins(pod_files, script, seconds, output):
    program = interpret(["sh", "-c", script], 0, pod_files.draft("main"))
    assert (program.seconds, program.output) == (seconds, output)


def test_exec_runs_a_command_in_the_shells_place():
    assert interpret(["sh", "-c", "echo starting; exec sleep infinity; echo never"]) == Program(
        ((0, "starting\n"),), math.inf, 0)
    assert interpret(["sh", "-c", "exec false; echo never"]) == Program((), 0, 1)
    assert interpret(["exec", "true"]) is None  # the shell's own: no binary of that name


def test_exec_of_a_shell_runs_its_script_in_the_shells_place():
    """`exec sh -c SCRIPT` (it ran forever): the new shell has the exported variables alone, its own
    positional parameters and traps; the old shell's EXIT trap does not run, nothing after the exec."""
    script = ("trap 'echo old trap' EXIT; X=1; export Y=2; f() { echo f; }; "
              "exec sh -c 'trap \"echo new trap\" EXIT; echo $0 $1 \"[$X]\" $Y; f; sleep 2; exit 4' zero one; echo never")
    assert interpret(["sh", "-c", script], not_found=True) == Program(
        ((0, "zero one [] 2\n"), (2, "new trap\n")), 2, 4, ((1, 0, "sh: f: not found\n"),))
    assert interpret(["sh", "-c", "echo a; exec bash -c 'echo b'; echo never"]) == Program(((0, "a\n"), (0, "b\n")), 0, 0)


@pytest.mark.parametrize("argv, errors, code", [
    (["sleep", "-1"], "sleep: invalid number '-1'\n", 1),
    (["sleep", "nan"], "sleep: invalid number 'nan'\n", 1),
    (["sleep", "1", "x"], "sleep: invalid number 'x'\n", 1),  # refused before it sleeps at all
    (["sh", "-c", "sleep -5m; echo $?"], "sleep: invalid number '-5m'\n", 0),
    (["sh", "-c", "sleep nan & wait $!; echo $?"], "sleep: invalid number 'nan'\n", 0),
])
def test_sleep_refuses_what_is_not_a_number_of_seconds_as_busybox_does(argv, errors, code):
    """They ran forever (a sleep not interpreted); busybox's sleep refuses them at once."""
    program = interpret(argv)
    assert (program.seconds, program.exit_code, [e[2] for e in program.errors]) == (0, code, [errors])
    assert [text for _, text in program.output] == (["1\n"] if argv[0] == "sh" else [])
    assert interpret(["sleep", "1e3"]) is None  # GNU's sleep reads it, busybox's not: not simulated


@pytest.mark.parametrize("expression, value", [
    ("9223372036854775807 + 1", "-9223372036854775808"), ("-9223372036854775807 - 2", "9223372036854775807"),
    ("(9223372036854775807 + 1) / 2", "-4611686018427387904"),  # wrapped at each step, not at the end
    ("4611686018427387904 * 2", "-9223372036854775808"), ("-(-9223372036854775807 - 1)", "-9223372036854775808"),
    ("-7 / 2", "-3"), ("-7 % 2", "-1"), ("7 % -2", "1"),  # truncated toward zero, as C's
    ("2 && 3", "1"), ("0 || 5", "1"), ("!5", "0"), ("!0 + 1", "2"),  # 1 or 0; `!` before `+`
    ("3 > 2 > 1", "0"), ("2 == 1 < 3", "0"), ("1 < 2 == 1", "1"),  # not chained; relations first
])
def test_arithmetic_is_on_64_bit_signed_integers_as_dash_and_bash_work_it_out(expression, value):
    assert interpret(["sh", "-c", f"echo $(({expression}))"]).output == ((0, value + "\n"),)


def test_a_loop_waiting_for_a_file_goes_on_on_the_files_as_they_are_later(pod_files):
    """`until [ -f F ]` repeating itself on the files it was worked out on waits (`Program.wait`):
    resumed on the files as they are at a later pass, it waits again while F is missing, then
    runs what follows once it is there, from that time on."""
    script = "cd /tmp; echo start; until [ -f ready ]; do echo waiting; sleep 1; done; echo go; sleep 2; exit 4"
    program = interpret(["sh", "-c", script], 100.0, lambda: pod_files.draft("main"))
    assert (program.seconds, program.wait.at, program.wait.period) == (math.inf, 1.0, 1.0)
    assert program.writes() == [(0, "stdout", "start\n"), (0, "stdout", "waiting\n")]
    still = program.wait.resume(pod_files.draft("main", fresh=False), 101.0)
    assert (still.seconds, still.wait.at, still.writes()) == (math.inf, 1.0, [(0, "stdout", "waiting\n")])
    assert interpret(["touch", "/tmp/ready"], 101.5, pod_files.container("main")).exit_code == 0
    went_on = still.wait.resume(pod_files.draft("main", fresh=False), 102.0)
    assert (went_on.seconds, went_on.exit_code, went_on.wait) == (2.0, 4, None)
    assert went_on.writes() == [(0, "stdout", "go\n")]


def test_a_background_sleep_started_before_a_wait_for_a_file_is_still_waited_for_after_it(pod_files):
    """`sleep 100 &`, then a loop waiting for a file, then `wait`: resumed once the file is there
    (10 s in), the `wait` lasts until the job ends, 100 s after the start, not at once."""
    script = "sleep 100 & until [ -f /tmp/ready ]; do sleep 1; done; echo ready; wait; echo done"
    program = interpret(["sh", "-c", script], 100.0, lambda: pod_files.draft("main"))
    assert program.seconds == math.inf and program.wait is not None
    pod_files.container("main").write("/tmp/ready", b"")
    went_on = program.wait.resume(pod_files.draft("main", fresh=False), 110.0)
    assert (went_on.seconds, went_on.writes()) == (90.0, [(0, "stdout", "ready\n"), (90.0, "stdout", "done\n")])
    # `$!` and the job's PID carry over too
    script = "sleep 100 & job=$!; until [ -f /tmp/go ]; do sleep 1; done; wait $!; echo $? $job"
    program = interpret(["sh", "-c", script], 100.0, lambda: pod_files.draft("main"))
    pod_files.container("main").write("/tmp/go", b"")
    went_on = program.wait.resume(pod_files.draft("main", fresh=False), 110.0)
    assert (went_on.seconds, went_on.writes()) == (90.0, [(90.0, "stdout", "0 7\n")])


def test_sigterm_during_a_wait_that_went_on_is_worked_out_from_its_last_pass(pod_files):
    """A script trapping TERM and waiting for a file, resumed at a pass, still takes the kubelet's
    SIGTERM as its trap says: its action runs once the `sleep` running then ends, whenever in the
    pass the signal comes. One that ignores TERM (`trap '' TERM`: dash sets SIG_IGN, which its
    `sleep` inherits) waits on as if it never came, and ends by itself once the file is there."""
    wait = "until [ -f /tmp/drain ]; do sleep 1; done; echo done"
    trapping = interpret(["sh", "-c", f"trap 'echo got; exit 3' TERM; {wait}"], 100.0,
                         lambda: pod_files.draft("main"))
    waiting = trapping.wait.resume(pod_files.draft("main", fresh=False), 101.0)
    assert (waiting.seconds, waiting.wait.at) == (math.inf, 1.0)
    for at, ends in ((0.0, 0.0), (0.5, 1.0), (1.0, 1.0)):  # as the pass starts, in its `sleep 1`, as it ends
        taken = waiting.signalled(at, pod_files.draft("main", fresh=False))
        assert (taken.seconds, taken.exit_code, taken.writes()) == (ends, 3, [(ends, "stdout", "got\n")])
    later = waiting.signalled(5.0, pod_files.draft("main", fresh=False))  # past this pass: worked out to it
    assert (later.seconds, later.exit_code, later.writes()) == (5.0, 3, [(5.0, "stdout", "got\n")])
    ignoring = interpret(["sh", "-c", f"trap '' TERM; {wait}"], 100.0, lambda: pod_files.draft("main"))
    waiting = ignoring.wait.resume(pod_files.draft("main", fresh=False), 101.0)
    for at in (0.0, 0.5, 1.0):
        on = waiting.signalled(at, pod_files.draft("main", fresh=False))
        assert (on.seconds, on.wait.at, on.writes()) == (math.inf, 1.0, [])
    pod_files.container("main").write("/tmp/drain", b"")
    on = waiting.signalled(0.5, pod_files.draft("main", fresh=False))
    assert (on.exit_code, on.wait, [text for _, _, text in on.writes()]) == (0, None, ["done\n"])  # by itself
    assert interpret(["sh", "-c", wait], 100.0, lambda: pod_files.draft("main")).wait.resume(
        pod_files.draft("main", fresh=False), 101.0).signalled is None  # no trap: nothing to work out


@pytest.mark.parametrize("script", [
    "until [ -f /tmp/ready ]; do sleep 1; done",  # no files given: it cannot see any change
    "if true; then until [ -f /tmp/ready ]; do sleep 1; done; fi",  # not at the top level
    "while true; do ls /tmp; sleep 1; done",  # cannot end
])
def test_a_loop_that_cannot_go_on_later_runs_on_without_waiting(pod_files, script):
    files = None if script.startswith("until") else (lambda: pod_files.draft("main"))
    program = interpret(["sh", "-c", script], 0.0, files)
    assert program is None or (program.seconds, program.wait) == (math.inf, None)


def test_a_busy_loop_waiting_for_a_file_reads_it_again_each_second(pod_files):
    """`while [ ! -f F ]; do :; done` takes no time in its passes: it waits, reading its files again
    each second of the node's clock (BUSY_WAIT), instead of spinning silently for ever."""
    program = interpret(["sh", "-c", "while [ ! -f /tmp/ready ]; do :; done; echo ok"], 0.0,
                        lambda: pod_files.draft("main"))
    assert (program.seconds, program.wait.at, program.wait.period) == (math.inf, 1.0, 1.0)
    assert program.wait.resume(pod_files.draft("main", fresh=False), 1.0).wait.at == 1.0
    pod_files.container("main").write("/tmp/ready", b"")
    went_on = program.wait.resume(pod_files.draft("main", fresh=False), 2.0)
    assert (went_on.seconds, went_on.writes(), went_on.wait) == (0.0, [(0, "stdout", "ok\n")], None)


def test_a_line_typed_at_a_shell_waiting_for_a_file_goes_on_once_it_is_there(pod_files):
    """A shell's line waiting in a loop for a file waits as a container's command does (`Step.wait`):
    resumed at each later pass it logs that pass, then, once the file is there, runs what follows,
    its variables and status kept by the shell."""
    shell = Shell(lambda: pod_files.container("main"))
    step = shell.line("n=0; until [ -f /tmp/go ]; do echo waiting; sleep 5; done; n=1; echo go; false", 0.0)
    assert step.seconds == math.inf and step.output == ((0, "stdout", "waiting\n"), (5, "stdout", "waiting\n"))
    assert step.wait.at == 10.0
    step = shell.resume(step.wait, 10.0)
    assert (step.output, step.wait.at) == (((0, "stdout", "waiting\n"),), 5.0)
    pod_files.container("main").write("/tmp/go", b"")
    step = shell.resume(step.wait, 15.0)
    assert (step.seconds, step.output, step.wait) == (0.0, ((0, "stdout", "go\n"),), None)
    assert (shell.status, shell.line("echo $n", 10.0).output) == (1, ((0, "stdout", "1\n"),))


def test_random_is_a_number_drawn_afresh_each_time_the_same_for_the_same_start():
    """`$RANDOM` (ash's 0 to 32767) is seeded by what runs, on which pod and when: a simulation
    replayed on the same clock draws the same numbers; a loop drawing them is no repetition."""
    def drawn(now: float, host: str = "trainer") -> list[int]:
        program = interpret(["sh", "-c", "echo $RANDOM $RANDOM"], now, env={"HOSTNAME": host})
        return [int(n) for n in program.output[0][1].split()]
    first = drawn(100.0)
    assert all(0 <= n < 32768 for n in first) and first[0] != first[1]
    assert drawn(100.0) == first and drawn(101.0) != first and drawn(100.0, "other") != first
    loop = interpret(["sh", "-c", "while true; do echo $RANDOM; sleep 1; done"], 0.0, env={"HOSTNAME": "p"})
    assert len({x for _, _, x in itertools.islice(loop.timeline(), 20)}) > 15


@pytest.mark.parametrize("script, out", [
    ("printf 'root:x:0\\nbin:x:1\\nplain\\n' > /tmp/p; cut -d: -f1,3 /tmp/p; cut -d: -s -f2- /tmp/p",
     "root:0\nbin:1\nplain\nx:0\nx:1\n"),
    ("echo abcdef | cut -c2-4,6; echo 'a\tb' | cut -f2", "bcdf\nb\n"),
    ("printf 'a b\\nc\\n' | xargs -n 2 echo got; echo x | xargs; printf '/tmp/1\\n/tmp/2' | xargs touch; ls /tmp",
     "got a b\ngot c\nx\n1\n2\n"),
    ("printf 'one\\ntwo\\n' | xargs -I{} echo {}.txt; echo | xargs -r echo never; echo a | xargs false; echo $?",
     "one.txt\ntwo.txt\n123\n"),
])
def test_cut_and_xargs_as_busybox_runs_them(pod_files, script, out):
    program = interpret(["sh", "-c", script], 0.0, lambda: pod_files.draft("main"))
    assert "".join(x if isinstance(x, str) else x.decode() for _, x in program.output) == out


@pytest.mark.parametrize("script, out, code", [
    ("trap 'echo bye $?' EXIT; echo hi; exit 3", "hi\nbye 3\n", 3),  # the shell's status kept
    ("trap 'exit 5' EXIT; exit 3", "", 5),
    ("trap 'echo done' 0; sleep 2; false", "done\n", 1),
    ("trap 'echo never' EXIT; trap - EXIT; echo y", "y\n", 0),
    ("trap 'echo t' TERM INT; trap 'echo e' EXIT; trap", "trap -- 'echo e' EXIT\ntrap -- 'echo t' INT\n"
     "trap -- 'echo t' TERM\ne\n", 0),
])
def test_an_exit_trap_runs_as_the_shell_ends(script, out, code):
    program = interpret(["sh", "-c", script])
    assert ("".join(x for _, x in program.output), program.exit_code) == (out, code)


def test_a_shells_exit_trap_runs_when_it_exits_not_after_each_line():
    shell = Shell()
    assert shell.line("trap 'echo bye' EXIT", 0) == Step((), 0, False)
    assert shell.line("echo hi", 0).output == ((0, "stdout", "hi\n"),)
    assert shell.line("exit 2", 0) == Step(((0, "stdout", "bye\n"),), 0, True) and shell.status == 2
    shell = Shell()
    shell.line("trap 'echo bye $?' EXIT; false", 0)
    assert shell.close(0).output == ((0, "stdout", "bye 1\n"),) and shell.status == 1  # at the end of stdin


def test_sigterm_runs_the_trap_once_the_command_it_came_during_ends():
    """What a script trapping TERM does when the kubelet's SIGTERM comes at a time: its action runs
    once the `sleep` running then ends (a real shell waits for its foreground command), and the
    shell exits with the trap's code, its EXIT trap after; passes repeating until then are
    skipped, not worked out one by one. During `sleep infinity` it runs on (to be killed)."""
    script = "trap 'echo got $i; exit 3' TERM; trap 'echo bye' EXIT; i=0; while true; do sleep 2; done"
    program = interpret(["sh", "-c", script])
    assert (program.seconds, program.output) == (math.inf, ())
    later = program.signalled(100_001.5, None)
    assert (later.seconds, later.exit_code, later.writes()) == (
        100_002, 3, [(100_002, "stdout", "got 0\n"), (100_002, "stdout", "bye\n")])
    assert interpret(["sh", "-c", "echo up; while true; do sleep 1; done"]).signalled is None
    forever = interpret(["sh", "-c", "trap 'echo got' TERM; sleep infinity"]).signalled(5.0, None)
    assert (forever.seconds, forever.writes()) == (math.inf, [])
    counter = interpret(["sh", "-c", "trap 'echo at $i; exit' TERM; i=0; while true; do i=$((i+1)); sleep 1; done"])
    assert counter.signalled(80.5, None).writes() == [(81, "stdout", "at 81\n")]  # its passes worked out to it
    assert counter.signalled(1e6, None) is None  # too far to work out: as the kubelet's stop says


@pytest.mark.parametrize("argv, outlives", [
    (["sleep", "infinity"], True),  # no handler: the kernel drops the signal to a PID 1
    (["sh", "-c", "while true; do echo step; sleep 1; done"], True),
    (["sh", "-c", "trap 'exit 0' TERM; trap - TERM; sleep 600"], False),  # a trap that acts, for a while
    (["sh", "-c", "trap - TERM; sleep 600"], True),  # the default again: dropped as well
    (["sh", "-c", "trap '' TERM; python train.py"], True),  # ignored, the shell PID 1 whatever it runs
    (["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"], False),
    (["sh", "-c", "f() { trap 'exit 0' SIGTERM; }; f; sleep 600"], False),  # set in a function
    (["sh", "-c", "trap '' 15; $SETUP; sleep 600"], False),  # a command named by an expansion may trap it
    (["sh", "-c", "trap 'exit 143' TERM; sleep infinity & wait"], False),  # a background list beside the trap
    (["sh", "-c", "sleep 600 & trap 'exit 0' TERM; wait"], False),  # the trap after a background list
    (["sh", "-c", "python train.py"], False),  # the shell may exec it: its handlers are unknown
    (["python", "train.py"], False),
    (["sh"], False),
])
def test_a_first_process_outlives_sigterm_unless_it_may_handle_it(argv, outlives):
    """Whether the kubelet's SIGTERM leaves a container's first process running (to be killed when
    the grace period is up), as runc's PID 1 would, from its command and whether it is interpreted."""
    assert outlives_sigterm(argv, interpret(argv) is not None) is outlives


@pytest.mark.parametrize("script", [
    "f() { f; }; f",  # recursion without end: a real shell's stack overflows
    "echo " + "$(echo " * 3000 + "x" + ")" * 3000,  # nested deeper than the interpreter's stack
    "if true; then " * 4000 + "echo y" + "; fi" * 4000,
    "seq 1 100000000 | tail -1",  # 900 MB at one instant
    "x=a; while true; do x=\"$x$x\"; done",  # a variable doubling each pass
    "printf '%0999999999d\\n' 1",
])
def test_a_script_past_the_interpreters_stack_or_write_budget_is_not_interpreted(script, pod_files):
    """Found by fuzz54: each of these, as a pod's command, took the node agent down (a RecursionError
    failing the pod's worker; tens of GB of memory until the kernel killed `nanokube up`). Each is
    left uninterpreted, as any command that is not simulated, at once."""
    assert interpret(["sh", "-c", script], 0.0, lambda: pod_files.draft("main")) is None


def test_the_write_budget_leaves_ordinary_output_alone(pod_files):
    program = interpret(["sh", "-c", "seq 3; seq 1 0 5; seq 100000 | tail -1; n=0; f() { n=$((n + 1)); "
                         "[ $n -lt 50 ] && f; }; f; echo $n"], 0.0, lambda: pod_files.draft("main"))
    assert "".join(x if isinstance(x, str) else x.decode() for _, x in program.output) == "1\n2\n3\n100000\n50\n"


@pytest.mark.parametrize("script, log, code", [
    ("echo $((9223372036854775807 + 1)) $((-7 / 2)); sleep -1", b"-9223372036854775808 -3\nsleep: invalid number '-1'\n", 1),
    ("sleep nan", b"sleep: invalid number 'nan'\n", 1),
    ("export A=a; B=b; exec sh -c 'echo in $A \"[$B]\"; sleep 2; exit 4'; echo never", b"in a []\n", 4),
])
async def test_a_pods_command_ends_with_its_log_and_exit_code(script, log, code):
    """Through a node agent: the pod's `sh -c` command (these ran forever) ends in its time with the
    exit code and log a shell gives."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        p = pod("run", restart="Never")
        p["spec"]["containers"][0]["command"] = ["sh", "-c", script]
        await pods.create(p)

        async def ended():
            await clock.advance(1)
            return await phase_is(pods, "run", "Failed")()
        done = await eventually(ended)
        assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
        assert await mgr.read_log("default", "run", "app", {}) == log


@pytest.mark.parametrize("program", [
    'BEGIN { x = "ab"; while (1) x = x x }',
    "BEGIN { $10000000 = 1; print NF }",
    'BEGIN { x = sprintf("%99999999s", "x"); print length(x) }',
])
def test_an_awk_program_past_its_budget_of_work_is_not_simulated(pod_files, program):
    """An awk program runs in the agent's event loop: one that builds ever longer strings, makes ten
    million fields or pads to 100 MB is given up once past its work (simulated_awk.STEPS, which counts
    the characters and fields it makes), where it would take the whole process's memory or time; one
    within it still runs."""
    def run(text: str):
        return interpret(["sh", "-c", f"awk '{text}'"], 0.0, lambda: pod_files.draft("main"))
    assert run(program) is None
    assert run('BEGIN { x = "ab"; x = x x; $3 = x; printf "%-6s|%s\\n", NF, $0 }').output == ((0, b"3     |  abab\n"),)
