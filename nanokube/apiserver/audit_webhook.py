"""The audit webhook backend (`--audit-webhook-config-file`): audit events POSTed as an
`audit.k8s.io/v1` EventList to the server a kubeconfig names, as kube-apiserver's webhook backend
(plugin/pkg/audit/webhook) sends them, in one of its modes:

- `batch` (the default): events are buffered (10,000 at most; more are dropped, and logged) and
  sent in batches of up to 400, or whatever has gathered after 30 s (plugin/pkg/audit/buffered);
- `blocking`: a request is answered once its events (and what else is pending) have been sent.

A failed POST (no connection, or a 5xx) is retried with exponential backoff (10 s, then x1.5, five
tries, as webhook.DefaultRetryBackoffWithInitialDelay); a batch that still fails is dropped and logged."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from ..client import kubeconfig

log = logging.getLogger(__name__)

MODES = ("batch", "blocking")
_HEAD = b'{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":['


class WebhookError(ValueError):
    """A webhook configuration that cannot be used: the server does not start."""


class WebhookBackend:
    def __init__(self, config_path: str, mode: str = "batch", *, max_batch: int = 400, max_wait: float = 30.0,
                 buffer: int = 10_000, initial_backoff: float = 10.0, tries: int = 5):
        if mode not in MODES:
            raise WebhookError(f'invalid audit webhook mode "{mode}", allowed modes are "{", ".join(MODES)}"')
        try:
            creds = kubeconfig.load(config_path, env={})
        except kubeconfig.KubeconfigError as e:
            raise WebhookError(f"invalid configuration for the audit webhook: {e}") from None
        self.url, self.ssl, self.token = creds.server, creds.ssl, creds.token
        self.mode, self.max_batch, self.max_wait, self.buffer = mode, max_batch, max_wait, buffer
        self.initial_backoff, self.tries = initial_backoff, tries
        #: encoded events not yet sent, oldest first
        self.pending: list[bytes] = []
        self._session: aiohttp.ClientSession | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ssl if self.ssl else False))
        self._wake = asyncio.Event()
        if self.mode == "batch":
            self._task = asyncio.get_running_loop().create_task(self._batches())

    def add(self, line: bytes) -> None:
        """One encoded event (its line, newline included)."""
        if self.mode == "batch" and len(self.pending) >= self.buffer:
            log.error("audit webhook: the buffer of %d events is full: an event is dropped", self.buffer)
            return
        self.pending.append(line.rstrip(b"\n"))
        if len(self.pending) >= self.max_batch and self._wake is not None:
            self._wake.set()

    async def flush(self) -> None:
        """Send everything pending (a blocking request's events, or what is left at shutdown)."""
        while self.pending:
            batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
            await self._send(batch)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            self.tries = 1  # what is left is sent once: a webhook that is down does not hold up the shutdown
            await self.flush()
            await self._session.close()

    async def _batches(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.max_wait)
            except TimeoutError:
                pass
            self._wake.clear()
            if self.pending:
                batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
                await self._send(batch)
                if len(self.pending) >= self.max_batch:
                    self._wake.set()

    async def _send(self, batch: list[bytes]) -> None:
        body = _HEAD + b",".join(batch) + b"]}"
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        delay = self.initial_backoff
        for attempt in range(self.tries):
            try:
                async with self._session.post(self.url, data=body, headers=headers) as r:
                    if r.status < 500:
                        if r.status >= 300:
                            log.error("audit webhook %s: %d events refused: %d %s", self.url, len(batch), r.status,
                                      (await r.text())[:200])
                        return
                    why = f"{r.status} {(await r.text())[:200]}"
            except (aiohttp.ClientError, OSError) as e:
                why = str(e)
            if attempt + 1 < self.tries:
                await asyncio.sleep(delay)
                delay *= 1.5
        log.error("audit webhook %s: %d events dropped after %d tries: %s", self.url, len(batch), self.tries, why)
