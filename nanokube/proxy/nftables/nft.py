"""Runs `nft` with a transaction on stdin, optionally inside a network
namespace; one call is one atomic kernel transaction."""

from __future__ import annotations

import subprocess

import orjson


class NftError(RuntimeError):
    """`nft` rejected the transaction; the kernel state is unchanged."""


class Nft:
    def __init__(self, netns: str | None = None, binary: str = "nft"):
        self.netns = netns
        self.binary = binary

    def _argv(self, *args: str) -> list[str]:
        argv = [self.binary, *args]
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def apply(self, transaction: str) -> None:
        """Load `transaction` (nft -f syntax) atomically."""
        p = subprocess.run(self._argv("-f", "-"), check=False, input=transaction.encode(), capture_output=True)
        if p.returncode != 0:
            raise NftError(p.stderr.decode(errors="replace").strip() or f"nft exited {p.returncode}")

    def list_table(self, family: str, table: str) -> list[dict]:
        """The table as `nft -j` objects (tests and debugging; never on the sync path)."""
        p = subprocess.run(self._argv("-j", "list", "table", family, table), check=False,
                           capture_output=True)
        if p.returncode != 0:
            raise NftError(p.stderr.decode(errors="replace").strip())
        return [o for o in orjson.loads(p.stdout)["nftables"] if "metainfo" not in o]
