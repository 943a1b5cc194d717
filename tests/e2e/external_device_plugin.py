"""An external device plugin as its own process, as a vendor's DaemonSet runs one next to the
kubelet: `python -m tests.e2e.external_device_plugin DIR RESOURCE ID...` serves the DevicePlugin
API of tests/node/devicemanager/plugin_server.py on DIR/fpga.sock, registers over DIR/kubelet.sock,
prints "registered" (or the refusal, and exits 1), and serves until terminated."""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc

from tests.node.devicemanager.plugin_server import DevicePlugin


async def main(directory: str, resource: str, ids: list[str]) -> int:
    plugin = await DevicePlugin(directory, resource, dict.fromkeys(ids)).start()
    try:
        try:
            await plugin.register()
        except grpc.aio.AioRpcError as e:
            print(f"refused: {e.code().name}: {e.details()}", flush=True)
            return 1
        print("registered", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        return 0
    finally:
        await plugin.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:])))
