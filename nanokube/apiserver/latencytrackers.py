"""endpoints/request's LatencyTrackers, for the request latency SLI (apiserver_request_sli_duration_seconds):
the time a request spent waiting on what its SLI leaves out, as kube-apiserver measures it. Mutating
webhook calls add up (they run one after another), validating ones count their longest (they run
together), and the time API Priority and Fairness held the request in its queue counts as it was.
A watch has none: upstream attaches no trackers to one, and it is not observed."""

from __future__ import annotations

from contextvars import ContextVar, Token

from aiohttp import web

#: the seconds APF queued a request for (set by apf.py before the request is dispatched)
APF_WAIT = web.RequestKey("nanokube.apf_wait", float)


class Trackers:
    __slots__ = ("mutating", "validating", "apf_wait")

    def __init__(self, apf_wait: float) -> None:
        self.mutating = self.validating = 0.0
        self.apf_wait = apf_wait

    def excluded(self) -> float:
        return self.mutating + self.validating + self.apf_wait


_TRACKERS: ContextVar[Trackers | None] = ContextVar("nanokube.apiserver.latency_trackers", default=None)


def start(request: web.Request) -> tuple[Token, Trackers]:
    """Trackers for the request being served (its task's context); `stop` with the token."""
    trackers = Trackers(request.get(APF_WAIT, 0.0))
    return _TRACKERS.set(trackers), trackers


def stop(token: Token) -> None:
    _TRACKERS.reset(token)


def webhook(mutating: bool, seconds: float) -> None:
    """One admission webhook call of the request being served; nothing outside a request."""
    trackers = _TRACKERS.get()
    if trackers is None:
        return
    if mutating:
        trackers.mutating += seconds
    elif seconds > trackers.validating:
        trackers.validating = seconds
