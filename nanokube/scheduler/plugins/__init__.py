"""The in-tree plugins by upstream name, and the default profile."""

from __future__ import annotations

from ..framework import Profile
from ...machinery.featuregates import enabled
from .default_binder import DefaultBinder
from .default_preemption import DefaultPreemption
from .dynamic_resources import DynamicResources
from .gang import GangScheduling
from .gpu_baselines import GPUBestFit, GPUDotProduct, GPUPacking, RandomScore
from .gpu_fragmentation import GPUFragmentationGradient
from .image_locality import ImageLocality
from .inter_pod_affinity import InterPodAffinity
from .node_affinity import NodeAffinity
from .node_name import NodeName
from .node_ports import NodePorts
from .node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from .node_resources_fit import NodeResourcesFit
from .node_unschedulable import NodeUnschedulable
from .node_volume_limits import NodeVolumeLimits
from .pod_topology_spread import PodTopologySpread
from .priority_sort import PrioritySort
from .scheduling_gates import SchedulingGates
from .taint_toleration import TaintToleration
from .volume_binding import VolumeBinding
from .volume_restrictions import VolumeRestrictions
from .volume_zone import VolumeZone

REGISTRY = {p.name: p for p in (PrioritySort, SchedulingGates, GangScheduling, NodeUnschedulable, NodeName, TaintToleration,
                                NodeAffinity, NodePorts, NodeResourcesFit, NodeResourcesBalancedAllocation,
                                VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, DynamicResources, DefaultPreemption, ImageLocality, DefaultBinder,
                                GPUFragmentationGradient, GPUBestFit, GPUDotProduct, GPUPacking, RandomScore)}

#: upstream's default plugin set (of those implemented) and score weights
DEFAULT_PLUGINS = ["PrioritySort", "SchedulingGates", "GangScheduling", "NodeUnschedulable", "NodeName", "TaintToleration",
                   "NodeAffinity", "NodePorts", "NodeResourcesFit", "NodeResourcesBalancedAllocation",
                   "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "DefaultPreemption", "ImageLocality", "DefaultBinder"]
DEFAULT_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                   "NodeResourcesBalancedAllocation": 1, "PodTopologySpread": 2, "InterPodAffinity": 2,
                   "ImageLocality": 1}


def default_plugin_names() -> list[str]:
    """DEFAULT_PLUGINS as the feature gates leave them (applyFeatureGates): GangScheduling with GenericWorkload."""
    return [p for p in DEFAULT_PLUGINS if p != "GangScheduling" or enabled("GenericWorkload")]


def default_profile(scheduler_name: str = "default-scheduler") -> Profile:
    return Profile(scheduler_name, default_plugin_names(), dict(DEFAULT_WEIGHTS))


def build(profile: Profile, handle) -> list:
    """Instantiates a profile's plugins with their args and the scheduler handle."""
    return [REGISTRY[name](profile.args.get(name) or {}, handle) for name in profile.plugins]
