"""A node agent's streaming server (the kubelet's /exec, /attach,
/portForward and /containerLogs): finds the worker running the pod and lets
its runtime serve the request. The API server reaches it in-process through
`NodeManager.streaming_for(node)`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

from ..clock import parse_time
from ..machinery import errors, validation
from ..machinery.streaming import LogOptions, StreamFailed, StreamSession, log_stream_errors

if TYPE_CHECKING:
    from .agent import NodeAgent
    from .lifecycle import PodWorker


class NodeStreamingServer:
    def __init__(self, agent: NodeAgent):
        self.agent = agent

    def _worker(self, namespace: str, pod: str, uid: str) -> PodWorker:
        w = self.agent.worker(uid)
        if w is None or w.namespace != namespace or w.name != pod:
            raise StreamFailed(f'pod "{pod}" in namespace "{namespace}" is not running on node "{self.agent.name}"')
        return w

    def has_container(self, namespace: str, pod: str, uid: str, container: str) -> bool:
        w = self.agent.worker(uid)
        return w is not None and w.namespace == namespace and w.name == pod and w.has_container(container)

    async def exec(self, namespace: str, pod: str, uid: str, container: str, command: list[str],
                   session: StreamSession) -> int:
        return await self._worker(namespace, pod, uid).exec(container, command, session)

    async def attach(self, namespace: str, pod: str, uid: str, container: str, session: StreamSession) -> int | None:
        return await self._worker(namespace, pod, uid).attach(container, session)

    async def port_forward(self, namespace: str, pod: str, uid: str,
                           port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self._worker(namespace, pod, uid).port_forward(port)

    async def logs(self, namespace: str, pod: str, uid: str, container: str,
                   options: LogOptions) -> bytes | AsyncIterable[bytes]:
        w = self.agent.worker(uid)
        if w is None:
            raise errors.bad_request(f'container "{container}" in pod "{pod}" is waiting to start: ContainerCreating')
        return await w.logs(container, options)


#: the kubelet's words for the image pull failures a container without a log waits in
_NO_LOG_REASONS = {"ErrImagePull": "image can't be pulled", "ImagePullBackOff": "trying and failing to pull image"}


def no_log(pod: dict, container: str) -> errors.APIError:
    """Why a container that has not run has no log, as the kubelet's validateContainerLogStatus
    words it from the container's status (400 through pods/log)."""
    st = pod.get("status") or {}
    cs = next((s for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
               for s in st.get(key) or () if s.get("name") == container), {})
    state = cs.get("state") or {}
    where = f'container "{container}" in pod "{pod["metadata"]["name"]}"'
    if "terminated" in state:
        return errors.bad_request(f"{where} is terminated")
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    return errors.bad_request(f"{where} is waiting to start: {_NO_LOG_REASONS.get(reason, reason)}")


def log_options(query, now: float, pod: str = "") -> LogOptions:
    """PodLogOptions from the pods/log query, checked as kube-apiserver checks them
    (422 `PodLogOptions "<pod>" is invalid`)."""
    def invalid(error) -> errors.APIError:
        return errors.invalid("", "PodLogOptions", pod, [error])

    def number(key: str, minimum: int) -> int | None:
        v = query.get(key)
        if v is None:
            return None
        try:
            n = int(v)
        except ValueError:
            raise errors.bad_request(f'{key}: Invalid value: "{v}": must be an integer') from None
        if n < minimum:
            bound = "greater than or equal to 0" if minimum == 0 else "greater than 0"
            raise invalid(validation.invalid(key, n, f"must be {bound}"))
        return n

    since = None
    if query.get("sinceSeconds") is not None:
        since = now - number("sinceSeconds", 1)
    if query.get("sinceTime"):
        if since is not None:
            # upstream's field.NewPath(""): an empty name prints as an empty subscript
            raise invalid(validation.forbidden("[]", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
        try:
            since = parse_time(query["sinceTime"])
        except ValueError:
            raise errors.bad_request(f'sinceTime: Invalid value: "{query["sinceTime"]}"') from None
    tail_lines, stream = number("tailLines", 0), query.get("stream")
    if stream is not None:  # the API server sends it with PodLogsQuerySplitStreams on
        if errs := log_stream_errors(stream, tail_lines):
            raise errors.invalid("", "PodLogOptions", pod, errs)
    return LogOptions(follow=query.get("follow") in ("true", "1"), previous=query.get("previous") in ("true", "1"),
                      timestamps=query.get("timestamps") in ("true", "1"), since=since,
                      tail_lines=tail_lines, limit_bytes=number("limitBytes", 1),
                      stream=None if stream in (None, "All") else stream.lower())
