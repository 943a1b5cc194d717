"""Becomes one container's process, run inside its pod's network namespace
by `ip netns exec` (which already gives it a private mount namespace):
set the pod's hostname in a UTS namespace of its own, bind its volumes at
their mount paths, change to its working directory, take a terminal on
stdin as the controlling one, and exec the command.

Run as a plain script (stdlib only) so a container starts without
importing nanokube: `python3 -I launch.py SPEC_JSON`.
"""

import ctypes
import fcntl
import json
import os
import sys
import termios

CLONE_NEWUTS = 0x04000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        sys.stderr.write(f"nanokube launch: {what}: {os.strerror(err)}\n")
        sys.exit(128)


def main() -> None:
    spec = json.loads(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.unshare(CLONE_NEWUTS), "unshare UTS namespace")
    name = spec["hostname"].encode()
    _check(libc.sethostname(name, len(name)), "sethostname")
    for src, dst, read_only in spec["mounts"]:
        _check(libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), f"bind {src} on {dst}")
        if read_only:
            _check(libc.mount(None, dst.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None), f"read-only {dst}")
    try:
        os.chdir(spec["workdir"])
    except OSError as e:
        sys.stderr.write(f"nanokube launch: workingDir {spec['workdir']}: {e.strerror}\n")
        sys.exit(128)
    if os.isatty(0):  # a tty container or exec: its terminal becomes the controlling one (job control)
        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        except OSError:
            pass
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as e:
        sys.stderr.write(f"nanokube launch: exec {argv[0]}: {e.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
