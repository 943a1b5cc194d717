"""The audit webhook backend (`--audit-webhook-config-file`): audit events POSTed as an
`audit.k8s.io/v1` EventList to the server a kubeconfig names, as kube-apiserver's webhook backend
(plugin/pkg/audit/webhook) sends them, in one of its modes:

- `batch` (the default): events are buffered (`--audit-webhook-batch-buffer-size`, 10,000; more are
  dropped, and logged) and sent in batches of up to `--audit-webhook-batch-max-size` (400), or
  whatever has gathered after `--audit-webhook-batch-max-wait` (30 s), each batch on its own once
  the throttle lets it (`--audit-webhook-batch-throttle-qps` 10 a second, bursts of 15; off with
  `--audit-webhook-batch-throttle-enable=false`), as plugin/pkg/audit/buffered sends them;
- `blocking`: a request's RequestReceived event is sent before the request goes on, and the
  request answered once its other events (and what else is pending) have been sent;
- `blocking-strict`: the same, and a RequestReceived event that cannot be sent fails its request.

A failed POST (no connection, or a 5xx) is retried with exponential backoff (`--audit-webhook-initial-backoff`,
10 s, then x1.5, five tries, as webhook.DefaultRetryBackoffWithInitialDelay); a batch that still
fails is dropped and logged."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from ..client import kubeconfig
from . import audit_truncate
from .audit_modes import MODES

log = logging.getLogger(__name__)

_HEAD = b'{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":['


class WebhookError(ValueError):
    """A webhook configuration that cannot be used: the server does not start."""


class WebhookBackend:
    def __init__(self, config_path: str, mode: str = "batch", *, max_batch: int = 400, max_wait: float = 30.0,
                 buffer: int = 10_000, initial_backoff: float = 10.0, tries: int = 5,
                 throttle: tuple[float, int] | None = (10.0, 15), truncate: audit_truncate.Truncate | None = None):
        """`throttle`: (batches a second, burst) in batch mode, or None for none; `truncate`: the
        truncate plugin's limits, where --audit-webhook-truncate-enabled."""
        if mode not in MODES:
            raise WebhookError(f'invalid audit webhook mode {mode}, allowed modes are "{",".join(MODES)}"')
        try:
            creds = kubeconfig.load(config_path, env={})
        except kubeconfig.KubeconfigError as e:
            raise WebhookError(f"invalid configuration for the audit webhook: {e}") from None
        self.url, self.ssl, self.token = creds.server, creds.ssl, creds.token
        self.mode, self.max_batch, self.max_wait, self.buffer = mode, max_batch, max_wait, buffer
        self.initial_backoff, self.tries = initial_backoff, tries
        self.truncate = truncate
        self._throttle = TokenBucket(*throttle) if throttle is not None and mode == "batch" else None
        #: the batches being sent (batch mode sends each on its own, as upstream's AsyncDelegate)
        self._sending: set[asyncio.Task] = set()
        #: the audit's metrics (AuditLog sets them), which count the events each plugin failed to take
        self.errors = None
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

    def truncated(self, line: bytes) -> bytes | None:
        """An encoded event (its line) as it is sent, without its newline: truncated where the
        truncate plugin is on, None where it is dropped as too large even so (counted)."""
        if self.truncate is not None and (line := audit_truncate.truncated(line, self.truncate.max_event)) is None:
            log.error("audit webhook %s: an event is too large even after truncating", self.url)
            if self.errors is not None:
                self.errors.error("truncate")
            return None
        return line.rstrip(b"\n")

    def add(self, line: bytes) -> None:
        """One encoded event (its line, newline included)."""
        if (line := self.truncated(line)) is None:
            return
        if self.mode == "batch" and len(self.pending) >= self.buffer:
            log.error("audit webhook: the buffer of %d events is full: an event is dropped", self.buffer)
            if self.errors is not None:
                self.errors.error("buffered")
            return
        self.pending.append(line)
        if len(self.pending) >= self.max_batch and self._wake is not None:
            self._wake.set()

    async def flush(self) -> bool:
        """Send everything pending (a blocking request's events, or what is left at shutdown); False
        if a batch could not be sent."""
        ok = True
        while self.pending:
            batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
            ok = await self.send(batch) and ok
        return ok

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.tries = 1  # what is left is sent once (no more retries): a webhook that is down does not hold up the shutdown
        await asyncio.gather(*self._sending, return_exceptions=True)
        if self._session is not None:
            await self.flush()
            await self._session.close()

    async def _batches(self) -> None:
        while True:
            try:  # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel (close) that comes as the wake does
                async with asyncio.timeout(self.max_wait):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if self.pending:
                if self._throttle is not None:  # (before the batch is taken: one cancelled here is sent at close)
                    await self._throttle.take()
                batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
                task = asyncio.create_task(self.send(batch))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
                if len(self.pending) >= self.max_batch:
                    self._wake.set()

    async def send(self, batch: list[bytes]) -> bool:
        """POST encoded events (lines without their newline) as one EventList (several, each within
        the truncate plugin's batch size, where it is on), retried with backoff; False if one could
        not be sent (logged)."""
        if self.truncate is not None:
            parts = audit_truncate.split(batch, self.truncate.max_batch)
            if len(parts) > 1:
                ok = True
                for part in parts:
                    ok = await self._post(part) and ok
                return ok
        return await self._post(batch)

    async def _post(self, batch: list[bytes]) -> bool:
        body = _HEAD + b",".join(batch) + b"]}"
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        delay = self.initial_backoff
        for attempt in range(self.tries):
            try:
                async with self._session.post(self.url, data=body, headers=headers) as r:
                    if r.status < 500:
                        if r.status < 300:
                            return True
                        log.error("audit webhook %s: %d events refused: %d %s", self.url, len(batch), r.status,
                                  (await r.text())[:200])
                        return self._failed(batch)
                    why = f"{r.status} {(await r.text())[:200]}"
            except (aiohttp.ClientError, OSError) as e:
                why = str(e)
            if attempt + 1 < self.tries:
                await asyncio.sleep(delay)
                delay *= 1.5
        log.error("audit webhook %s: %d events dropped after %d tries: %s", self.url, len(batch), self.tries, why)
        return self._failed(batch)

    def _failed(self, batch: list[bytes]) -> bool:
        if self.errors is not None:
            self.errors.error("webhook", len(batch))
        return False


class TokenBucket:
    """client-go's token bucket rate limiter, which upstream's buffered backend waits on before each
    batch: `qps` tokens a second, at most `burst` saved up."""

    def __init__(self, qps: float, burst: int):
        self.qps, self.burst = qps, burst
        self.tokens = float(burst)
        self.last: float | None = None

    async def take(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self.last is not None:
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.qps)
