"""Whether a container's image names an image at all: the reference grammar the kubelet's image
manager parses every image with before it looks for it or pulls it (applyDefaultImageTag, through
the distribution project's normalized-name parser), so that `image: Foo:a:b` leaves the container
waiting in InvalidImageName, never pulled, as on a real node.

A reference is `[host[:port]/]path[:tag][@algorithm:hex]`: a bare name is Docker Hub's
(`docker.io/library/` put before it), a first component is a host where it has a dot or a colon,
is `localhost` or has an upper-case letter; the path's components are lower-case letters and
digits joined by `.`, `_`, `__` or dashes; a tag is a word character then up to 127 of word
characters, dots and dashes; the whole name at most 255 characters.
"""

from __future__ import annotations

import functools
import re

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_HOST_PART}(?:\.{_HOST_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_NAME = rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_REFERENCE = re.compile(rf"({_NAME})(?::[\w][\w.-]{{0,127}})?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*)"
                        r":([0-9a-fA-F]{32,}))?")
_HEX_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
#: the digest algorithms a reference may name, and the length of each one's hex
_DIGESTS = {"sha256": 64, "sha384": 96, "sha512": 128}
NAME_MAX = 255


def _parse_error(s: str) -> str:
    """Why `s`, a full reference (host first), does not parse; "" where it does."""
    match = _REFERENCE.fullmatch(s)
    if match is None:
        if not s:
            return "repository name must have at least one component"
        return "repository name must be lowercase" if _REFERENCE.fullmatch(s.lower()) else "invalid reference format"
    if len(match.group(1)) > NAME_MAX:
        return f"repository name must not be more than {NAME_MAX} characters"
    algorithm, encoded = match.group(2), match.group(3)
    if algorithm is not None:
        if algorithm not in _DIGESTS:
            return "unsupported digest algorithm"
        if len(encoded) != _DIGESTS[algorithm]:
            return "invalid checksum digest length"
        if encoded != encoded.lower():
            return "invalid checksum digest format"
    return ""


@functools.lru_cache(maxsize=1024)
def reference_error(image: str) -> str:
    """Why the normalized-name parser refuses `image` ("" where it parses): a 64-hex-digit
    identifier, an upper-case repository path (named with its Docker Hub prefix), or a reference
    the grammar does not match."""
    if _HEX_IDENTIFIER.fullmatch(image):
        return f"invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        domain, remainder = ("docker.io" if first == "index.docker.io" else first), rest
    else:
        domain, remainder = "docker.io", image
    if domain == "docker.io" and "/" not in remainder:
        remainder = f"library/{remainder}"
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        return f"invalid reference format: repository name ({remote}) must be lowercase"
    return _parse_error(f"{domain}/{remainder}")


def invalid_image_message(image: str) -> str:
    """The kubelet's message (the InspectFailed event's, the InvalidImageName waiting state's) for
    an image the parser refuses; "" for one it accepts."""
    error = reference_error(image)
    return error and f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": {error}'
