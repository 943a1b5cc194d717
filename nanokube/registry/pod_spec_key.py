"""The JSON a pod spec's checks are remembered by (issue 19): the pods of one template send one spec,
and ServiceAccount admission gives each its token volume under a name of its own."""

from __future__ import annotations

import re

import orjson

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

#: ServiceAccount admission's token volume name (`kube-api-access-` and five random characters), and
#: what stands for it in `spec_key` (the random characters never include 0)
_TOKEN_VOLUME = "kube-api-access-"
_STAND_IN = b'"kube-api-access-00000"'
#: a token volume name's random part, as the names `spec_key` sets aside have it: five lowercase
#: letters or digits after the prefix (a valid DNS label then, without a look-up of the name)
_SUFFIX = re.compile(r"[a-z0-9]{5}")


def spec_key(spec: dict) -> bytes:
    """The JSON a created pod's spec is remembered clean by: its own, but with its token volume's
    name put as `_STAND_IN` wherever it is (each pod of a template gets a name of its own). Only
    where the spec is clean exactly when its stand-in is: the name is the prefix and five lowercase
    letters or digits (a DNS label of the stand-in's length), no string of the spec is the
    stand-in, and the name appears nowhere but as that volume's name and as the names of mounts of
    it (not as another volume's, a device's, an env file's volume, or any other value): so the two
    specs have the same strings in the same places but there, and every check of the spec compares
    those names only with each other."""
    key = orjson.dumps(spec)
    for volume in spec.get("volumes") or ():
        name = volume.get("name") if type(volume) is dict else None
        if type(name) is str and name.startswith(_TOKEN_VOLUME):
            break
    else:
        return key
    if len(name) != len(_STAND_IN) - 2 or not _SUFFIX.fullmatch(name, len(_TOKEN_VOLUME)) or _STAND_IN in key:
        return key
    quoted = b'"%s"' % name.encode()
    mounts = 0
    for kind in _CONTAINER_LISTS:
        for c in spec.get(kind) or ():
            for m in (c.get("volumeMounts") or ()) if type(c) is dict else ():
                mounts += type(m) is dict and m.get("name") == name
    return key.replace(quoted, _STAND_IN) if key.count(quoted) == 1 + mounts else key
