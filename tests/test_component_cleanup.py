"""`nanokube scheduler` and `nanokube controller-manager` end, however they end (a signal, or the
cancellation asyncio.run makes of an error elsewhere or a ^C before they handle signals), with
nothing of theirs left: their client's connections, their informers and
controllers, their secure port."""

import argparse
import asyncio
import socket

import pytest

from nanokube import cli_controller_manager, cli_scheduler, component_cli
from tests.served import served


@pytest.mark.parametrize("component, name", [(cli_scheduler, "scheduler"),
                                             (cli_controller_manager, "controller-manager")])
async def test_cancelled_while_running_it_closes_all_it_opened(component, name, tmp_path, monkeypatch):
    async with served(tmp_path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        parser = argparse.ArgumentParser()
        component.add_parser(parser.add_subparsers())
        args = parser.parse_args([name, "--kubeconfig", str(tmp_path / "kubeconfig"), "--leader-elect=false",
                                  "--bind-address", "127.0.0.1", "--secure-port", str(port)])
        monkeypatch.setattr(component_cli, "run_loop", lambda main: main)  # run's flags judged, its coroutine here
        before = asyncio.all_tasks()
        running = asyncio.create_task(component.run(args))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:  # until its secure port answers
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                assert loop.time() < deadline and not running.done(), "its secure port never opened"
                await asyncio.sleep(0.05)
        mine = asyncio.all_tasks() - before - {running}
        assert mine, "it runs tasks of its own (informers, controllers)"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        deadline = loop.time() + 10
        while left := [t for t in mine if not t.done()]:  # (the server's side of its connections ends after them)
            assert loop.time() < deadline, left
            await asyncio.sleep(0.05)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
