"""Container logs: CRI-format files with rotation, lines written in pieces,
and PodLogOptions (since, tail, limit, timestamps, follow) applied."""

import asyncio

from nanokube.machinery.streaming import LogOptions
from nanokube.node.containerlog import ContainerLog, FileContainerLog, rfc3339nano


def test_cri_file_records_rotate_and_read_back(tmp_path):
    path = str(tmp_path / "0.log")
    log = FileContainerLog(path, max_size=200, max_files=3)
    for i in range(20):
        log.append(1_800_000_000 + i, "stdout" if i % 2 else "stderr", f"line {i:02d}\n".encode())
    first = (tmp_path / "0.log").read_text().splitlines()[0]
    assert first.split(" ", 1)[1].startswith(("stdout F line", "stderr F line"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.log", "0.log.1", "0.log.2"]
    lines = [r.line for r in log.records()]
    assert lines == [f"line {i:02d}\n".encode() for i in range(20 - len(lines), 20)], "oldest files dropped"
    assert 10 <= len(lines) < 20


def test_a_line_written_in_pieces_is_one_record_stamped_at_its_start():
    log = ContainerLog()
    log.append(10.0, "stdout", b"serv")
    log.append(11.0, "stdout", b"ing\nnext")
    log.close()
    assert [(r.time, r.line) for r in log.records()] == [(10.0, b"serving\n"), (11.0, b"next")]


def test_options_since_tail_limit_and_timestamps():
    log = ContainerLog()
    for i in range(5):
        log.append(100.0 + i, "stdout", f"l{i}\n".encode())
    assert log.serve(LogOptions(since=102.0)) == b"l2\nl3\nl4\n"
    assert log.serve(LogOptions(tail_lines=2)) == b"l3\nl4\n"
    assert log.serve(LogOptions(tail_lines=0)) == b""
    assert log.serve(LogOptions(limit_bytes=4)) == b"l0\nl"
    assert log.serve(LogOptions(timestamps=True, tail_lines=1)) == f"{rfc3339nano(104.0)} l4\n".encode()
    assert rfc3339nano(104.5) == "1970-01-01T00:01:44.5Z"


async def test_follow_gets_the_snapshot_then_new_lines_until_close():
    log = ContainerLog()
    log.append(1.0, "stdout", b"a\n")
    stream = log.serve(LogOptions(follow=True))
    got = []

    async def read():
        async for chunk in stream:
            got.append(chunk)
    reader = asyncio.ensure_future(read())
    await asyncio.sleep(0)
    log.append(2.0, "stdout", b"b\n")
    log.close()
    await asyncio.wait_for(reader, 5)
    assert got == [b"a\n", b"b\n"]


async def test_one_streams_lines_in_the_snapshot_and_as_they_come():
    """PodLogOptions.stream (KEP-3288): a follower of stderr gets none of stdout's lines."""
    log = ContainerLog()
    log.append(1.0, "stdout", b"out\n")
    log.append(1.0, "stderr", b"err\n")
    assert log.serve(LogOptions(stream="stdout")) == b"out\n"
    stream = log.serve(LogOptions(follow=True, stream="stderr"))
    log.append(2.0, "stdout", b"more out\n")
    log.append(2.0, "stderr", b"more err\n")
    log.close()
    assert b"".join([chunk async for chunk in stream]) == b"err\nmore err\n"


async def test_attach_gets_what_is_written_as_it_is_written_while_the_log_waits_for_the_line():
    """A shell's prompt (`/ # `, no new line after it) reaches an attached client at once, as a
    runtime's attach streams output; the log, and a follower of it, keep the line until it ends."""
    log = ContainerLog()
    log.append(10.0, "stdout", b"before\n")
    attached = log.attach()
    follow = log.serve(LogOptions(follow=True, tail_lines=0))
    log.append(11.0, "stdout", b"/ # ")
    assert await anext(attached) == ("stdout", b"/ # ")
    assert [r.line for r in log.records()] == [b"before\n"]
    pending = asyncio.ensure_future(anext(follow))
    await asyncio.sleep(0)
    assert not pending.done()
    log.append(12.0, "stderr", b"sh: ps: not found\n")
    assert await anext(attached) == ("stderr", b"sh: ps: not found\n")
    log.close()
    assert [x async for x in attached] == []
    assert log.attach() is None
    pending.cancel()


def test_removing_an_instance_deletes_its_files(tmp_path):
    log = FileContainerLog(str(tmp_path / "0.log"), max_size=40, max_files=3)
    for i in range(5):
        log.append(1.0, "stdout", f"line {i}\n".encode())
    log.close()
    log.remove()
    assert list(tmp_path.iterdir()) == []
