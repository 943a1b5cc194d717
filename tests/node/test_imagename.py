"""The reference grammar the kubelet checks an image against before it pulls it (imagename)."""

from __future__ import annotations

import pytest

from nanokube.node.imagename import invalid_image_message, reference_error

DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("image", [
    "busybox", "nginx:1.27", "registry.k8s.io/pause:3.10", "localhost:5000/team/app:v1", "Registry.Example/app",
    f"busybox@{DIGEST}", f"busybox:1.36@{DIGEST}", "[::1]:5000/app", "my-org/my_app__x:1.0-rc.1"])
def test_references_that_parse(image):
    assert (reference_error(image), invalid_image_message(image)) == ("", "")


@pytest.mark.parametrize("image,error", [
    ("Foo:a:b", "invalid reference format: repository name (library/Foo) must be lowercase"),
    ("org/App", "invalid reference format: repository name (org/App) must be lowercase"),
    ("foo:a:b", "invalid reference format"),
    ("ghcr.io/a//b", "invalid reference format"),
    ("app:", "invalid reference format"),
    ("0123456789abcdef" * 4, f"invalid repository name ({'0123456789abcdef' * 4}), cannot specify 64-byte "
                             "hexadecimal strings"),
    ("app@sha256:abc" + "0" * 40, "invalid checksum digest length"),
    ("app@md5:" + "0" * 32, "unsupported digest algorithm"),
    ("a" * 250 + "/b", "repository name must not be more than 255 characters")])
def test_references_the_parser_refuses(image, error):
    assert reference_error(image) == error
    assert invalid_image_message(image) == f'Failed to apply default image tag "{image}": couldn\'t parse image ' \
                                           f'name "{image}": {error}'
