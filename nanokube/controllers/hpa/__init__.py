"""HorizontalPodAutoscaler controller (autoscaling/v2 with 1.37 scale to zero).

`options_from_env` reads the controller flags that `nanokube up` lets users
shorten (tests use seconds instead of upstream's 15s/5m):
NANOKUBE_HPA_SYNC_PERIOD, NANOKUBE_HPA_DOWNSCALE_STABILIZATION,
NANOKUBE_HPA_TOLERANCE, NANOKUBE_HPA_CPU_INITIALIZATION_PERIOD (upstream's
--horizontal-pod-autoscaler-* flags)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .controller import HPAController

_ENV = {"NANOKUBE_HPA_SYNC_PERIOD": "sync_period", "NANOKUBE_HPA_DOWNSCALE_STABILIZATION": "downscale_window",
        "NANOKUBE_HPA_TOLERANCE": "tolerance", "NANOKUBE_HPA_CPU_INITIALIZATION_PERIOD": "cpu_initialization_period"}


def options_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    return {opt: float(env[var]) for var, opt in _ENV.items() if env.get(var)}


__all__ = ["HPAController", "options_from_env"]
