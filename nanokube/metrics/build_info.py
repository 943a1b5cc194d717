"""kubernetes_build_info, which component-base's metrics/prometheus/version registers in the legacy
registry of every component (kube-apiserver, the scheduler, the controller-manager, kube-proxy):
a constant 1 labelled by the build /version reports, which dashboards read a cluster's version from."""

from __future__ import annotations

from prometheus_client.metrics_core import GaugeMetricFamily

from ..machinery.version import INFO

#: the label names, each for the /version field it carries
_LABELS = {"major": "major", "minor": "minor", "git_version": "gitVersion", "git_commit": "gitCommit",
           "git_tree_state": "gitTreeState", "build_date": "buildDate", "go_version": "goVersion",
           "compiler": "compiler", "platform": "platform"}


class _BuildInfo:
    def __init__(self) -> None:
        self._family = GaugeMetricFamily(
            "kubernetes_build_info", "[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, "
            "git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and "
            "platform on which it is running.", labels=list(_LABELS))
        self._family.add_metric([INFO[field] for field in _LABELS.values()], 1.0)

    def collect(self):
        yield self._family


BUILD_INFO = _BuildInfo()
