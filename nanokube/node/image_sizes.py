"""How large a simulated node's images are: what `kubectl get node -o yaml` lists under
status.images (sizeBytes) and the kubelet's Pulled events report ("Image size: N bytes"), which
a real runtime gives as the compressed size of the image's layers for the node's platform
(linux/amd64 here). The scheduler's ImageLocality plugin scores nodes by these sizes.

The images people first run have their real sizes, roughly, as recent tags of them are on their
registries (a tag's variant, `alpine` or `slim`, its own); any other image gets a stable
stand-in between 30 and 250 MB, the size of a typical application image, as its digest is one.
"""

from __future__ import annotations

import hashlib

from .simulated_net import repository

MB = 1_000_000

#: compressed size by repository (registry and library/ left out), then by a tag's variant
SIZES: dict[str, dict[str, int]] = {
    "busybox": {"": 2_200_000},
    "alpine": {"": 3_600_000},
    "debian": {"": 49 * MB, "slim": 28 * MB},
    "ubuntu": {"": 30 * MB},
    "nginx": {"": 72 * MB, "alpine": 21 * MB},
    "httpd": {"": 58 * MB, "alpine": 23 * MB},
    "python": {"": 375 * MB, "slim": 45 * MB, "alpine": 18 * MB},
    "node": {"": 395 * MB, "slim": 72 * MB, "alpine": 48 * MB},
    "golang": {"": 295 * MB, "alpine": 80 * MB},
    "redis": {"": 45 * MB, "alpine": 17 * MB},
    "postgres": {"": 150 * MB, "alpine": 105 * MB},
    "mysql": {"": 170 * MB},
    "mariadb": {"": 120 * MB},
    "mongo": {"": 260 * MB},
    "memcached": {"": 32 * MB, "alpine": 5 * MB},
    "registry": {"": 10 * MB},
    "curlimages/curl": {"": 9 * MB},
    "pause": {"": 320_000},
    "coredns/coredns": {"": 18 * MB},
    "etcd": {"": 57 * MB},
    "kube-apiserver": {"": 29 * MB},
    "kube-controller-manager": {"": 27 * MB},
    "kube-scheduler": {"": 20 * MB},
    "kube-proxy": {"": 30 * MB},
    "nvidia/cuda": {"": 120 * MB, "runtime": 1_600 * MB, "devel": 4_400 * MB},
    "pytorch/pytorch": {"": 3_500 * MB, "devel": 8_000 * MB},
    "vllm/vllm-openai": {"": 8_500 * MB},
}


def _variant(reference: str, sizes: dict[str, int]) -> int:
    """The size of the variant the reference's tag names (`3.12-slim-bookworm`: slim, `alpine3.20`:
    alpine), else the plain one's."""
    tag = reference.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
    words = tag.replace(".", "-").split("-")
    return next((size for variant, size in sizes.items() if variant and any(w.startswith(variant) for w in words)),
                sizes[""])


def size(reference: str) -> int:
    """The size in bytes of the image a fully qualified `reference` names (lifecycle.image_ref's):
    a known repository's (`SIZES`), else a stable stand-in."""
    sizes = SIZES.get(repository(reference))
    if sizes is not None:
        return _variant(reference, sizes)
    return 30 * MB + int(hashlib.sha256(reference.encode()).hexdigest()[:8], 16) % (220 * MB)
