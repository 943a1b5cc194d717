"""Pod volumes on a node: each pod gets a directory the kubelet fills
before its containers start."""

from .manager import VolumeManager
from .sources import MountError

__all__ = ["MountError", "VolumeManager"]
