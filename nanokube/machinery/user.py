"""Who makes a request: the authenticated user the API server authorizes and audits, and the
identity each in-process component connects as (upstream's user.Info)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict = field(default_factory=dict)


#: the identity kube-controller-manager acts as (upstream's user.KubeControllerManager)
CONTROLLER_USER = User("system:kube-controller-manager", ("system:authenticated",))
#: the identity kube-scheduler acts as (upstream's user.KubeScheduler)
SCHEDULER_USER = User("system:kube-scheduler", ("system:authenticated",))
