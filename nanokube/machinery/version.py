"""The Kubernetes release nanokube implements, and the user agent client-go builds from it."""

from __future__ import annotations

import platform
import sys

#: the release, as a component's `version.Get().GitVersion` without nanokube's suffix
GIT_VERSION = "v1.37.0"
GIT_COMMIT = "0" * 40
#: what /version and /statusz report: the build's own version and the Go release upstream's is built with
BUILD_VERSION = f"{GIT_VERSION}-nanokube"
GO_VERSION = "go1.25.0"
#: version.Get(): what /version answers and kubernetes_build_info's labels say
INFO = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36",
    "gitVersion": BUILD_VERSION,
    "gitCommit": GIT_COMMIT,
    "gitTreeState": "clean",
    "buildDate": "2026-11-30T00:00:00Z",
    "goVersion": GO_VERSION,
    "compiler": "gc",
    "platform": "linux/amd64",
}
#: Go's names for the machines Python reports
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386", "ppc64le": "ppc64le", "s390x": "s390x"}


def user_agent(command: str) -> str:
    """client-go's DefaultKubernetesUserAgent for `command`: '<command>/<version> (<os>/<arch>)
    kubernetes/<commit>', the version without a pre-release part and the commit cut to 7 digits.
    Components add '/<name>' per client (rest.AddUserAgent), e.g. each controller its own."""
    machine = platform.machine().lower()
    return f"{command}/{GIT_VERSION} ({sys.platform}/{_GOARCH.get(machine, machine)}) kubernetes/{GIT_COMMIT[:7]}"
