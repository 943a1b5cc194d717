"""Loads nft transactions into the kernel, optionally inside a network
namespace; one call is one atomic kernel transaction.

Transactions go through libnftables (the library `nft` itself is) on one
long-lived context whose netlink socket is opened inside the target
namespace. Spawning `nft -f` per sync costs ~3 ms of process start, and the
kernel makes the closing of an nftables netlink socket wait for the
previous transaction's deferred release (an RCU grace period, ~13 ms here
whenever it deleted anything); a socket kept open pays neither. The `nft`
binary is the fallback where the library cannot be loaded, and lists the
table for tests and debugging.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import threading

import orjson

_CLONE_NEWNET = 0x40000000
#: libnftables' NFT_CTX_OUTPUT_JSON and NFT_CTX_OUTPUT_TERSE (declarations without set elements)
_OUTPUT_JSON, _OUTPUT_TERSE = 1 << 4, 1 << 11


class NftError(RuntimeError):
    """`nft` rejected the transaction; the kernel state is unchanged."""


def _load_libnftables() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("nftables") or "libnftables.so.1")
    except OSError:
        return None
    lib.nft_ctx_new.restype, lib.nft_ctx_new.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype, lib.nft_ctx_get_error_buffer.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.nft_ctx_get_output_buffer.restype, lib.nft_ctx_get_output_buffer.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nft_ctx_output_get_flags.restype, lib.nft_ctx_output_get_flags.argtypes = ctypes.c_uint, [ctypes.c_void_p]
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    return lib


_LIB = _load_libnftables()
_LIBC = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NftError(f"setns: {os.strerror(err)}")


class Nft:
    def __init__(self, netns: str | None = None, binary: str = "nft"):
        self.netns = netns
        self.binary = binary
        self._ctx: int | None = None
        self._lock = threading.Lock()

    def _argv(self, *args: str) -> list[str]:
        argv = [self.binary, *args]
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def _context(self) -> int:
        """The libnftables context, created (socket included) inside `netns`:
        this thread enters the namespace only for the creation."""
        if self._ctx is not None:
            return self._ctx
        if not self.netns:
            ctx = _LIB.nft_ctx_new(0)
        else:
            try:
                target = os.open(f"/run/netns/{self.netns}", os.O_RDONLY)
            except OSError as e:
                raise NftError(f"network namespace {self.netns}: {e.strerror}") from e
            home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            try:
                _setns(target)
                try:
                    ctx = _LIB.nft_ctx_new(0)
                finally:
                    _setns(home)
            finally:
                os.close(target)
                os.close(home)
        if not ctx:
            raise NftError("nft_ctx_new failed")
        _LIB.nft_ctx_buffer_output(ctx)
        _LIB.nft_ctx_buffer_error(ctx)
        self._ctx = ctx
        return ctx

    def apply(self, transaction: str) -> None:
        """Load `transaction` (nft -f syntax) atomically."""
        if _LIB is None:
            p = subprocess.run(self._argv("-f", "-"), check=False, input=transaction.encode(), capture_output=True)
            if p.returncode != 0:
                raise NftError(p.stderr.decode(errors="replace").strip() or f"nft exited {p.returncode}")
            return
        with self._lock:
            ctx = self._context()
            rc = _LIB.nft_run_cmd_from_buffer(ctx, transaction.encode())
            _LIB.nft_ctx_get_output_buffer(ctx)  # reading a buffer empties it
            err = (_LIB.nft_ctx_get_error_buffer(ctx) or b"").decode(errors="replace").strip()
            if rc != 0:
                raise NftError(err or "nft transaction failed")

    def declarations(self, what: str, family: str) -> list[dict]:
        """`nft -j -t list WHAT FAMILY` ("chains", "sets" or "maps"): the family's declarations,
        without rules or elements, on the sync's own context (a full sync reads its table's
        chains and sets this way); the JSON output is switched on only for the listing, as with
        it on the context would try to read transactions as JSON first."""
        if _LIB is None:
            return self._list("-t", "list", what, family)
        with self._lock:
            ctx = self._context()
            flags = _LIB.nft_ctx_output_get_flags(ctx)
            _LIB.nft_ctx_output_set_flags(ctx, flags | _OUTPUT_JSON | _OUTPUT_TERSE)
            try:
                rc = _LIB.nft_run_cmd_from_buffer(ctx, f"list {what} {family}".encode())
            finally:
                _LIB.nft_ctx_output_set_flags(ctx, flags)
            out = _LIB.nft_ctx_get_output_buffer(ctx) or b""
            err = (_LIB.nft_ctx_get_error_buffer(ctx) or b"").decode(errors="replace").strip()
            if rc != 0:
                raise NftError(err or f"nft list {what} {family} failed")
        return _objects(out)

    def close(self) -> None:
        """Free the context and its socket (the next `apply` opens a new one)."""
        with self._lock:
            if self._ctx is not None:
                _LIB.nft_ctx_free(self._ctx)
                self._ctx = None

    def __del__(self):
        if getattr(self, "_ctx", None) is not None and _LIB is not None:
            _LIB.nft_ctx_free(self._ctx)

    def list_table(self, family: str, table: str) -> list[dict]:
        """The table as `nft -j` objects (tests and debugging; never on the sync path)."""
        return self._list("list", "table", family, table)

    def list_ruleset(self) -> list[dict]:
        """Every table of the namespace as `nft -j` objects (start-up and --cleanup, never a sync)."""
        return self._list("list", "ruleset")

    def _list(self, *args: str) -> list[dict]:
        """`nft -j ARGS`' objects (ARGS: a list command)."""
        p = subprocess.run(self._argv("-j", *args), check=False, capture_output=True)
        if p.returncode != 0:
            raise NftError(p.stderr.decode(errors="replace").strip())
        return _objects(p.stdout)


def _objects(output: bytes) -> list[dict]:
    """A JSON listing's objects but its metainfo (an empty ruleset prints nothing)."""
    return [o for o in orjson.loads(output or b'{"nftables": []}')["nftables"] if "metainfo" not in o]
