"""CRD version conversion (apiextensions-apiserver's conversion package).

`None` rewrites only apiVersion. `Webhook` POSTs a ConversionReview (v1, or
v1beta1 when that is the first version the CRD lists that we speak) with the
objects not already at the desired version, checks the answer as upstream
does, and keeps from the webhook's metadata only labels and annotations:
everything else in metadata comes from the original object. Errors carry
upstream's words, wrapped as `conversion webhook for <gvk> failed: ...`.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from ...machinery.validation import validate_labels
from ..webhook.client import WebhookClient, WebhookError

#: upstream's webhookConverter timeout
TIMEOUT_SECONDS = 30.0
_REVIEW_VERSIONS = ("v1", "v1beta1")


class ConversionError(Exception):
    """A conversion that could not be done; the message is upstream's. The
    API server answers it as kube-apiserver answers an error that is not a
    Status: code 500 with no reason, so kubectl prints `Error from server:
    conversion webhook for ... failed: ...`."""


def _gvk(obj: dict) -> str:
    """A GroupVersionKind as Go's %v prints it: `group/version, Kind=Kind`."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group, _, version = api_version.rpartition("/")
    gv = f"{group}/{version}" if group else version
    return f"{gv}, Kind={kind}"


def _meta(obj: dict) -> dict:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


class Converter:
    """Converts custom objects between the versions of their CRD."""

    def __init__(self, client: WebhookClient | None = None) -> None:
        self.client = client or WebhookClient()

    async def convert(self, crd: dict, objects: list[dict], desired_api_version: str,
                      list_kind: str | None = None) -> list[dict]:
        """`objects` at `desired_api_version`, in order; ConversionError.
        `list_kind` names the list in errors when a list is being converted
        (upstream converts a list in one review: `Kind=WidgetList`)."""
        todo = [i for i, o in enumerate(objects) if o.get("apiVersion") != desired_api_version]
        if not todo:
            return list(objects)
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy", "None") != "Webhook":
            out = list(objects)
            for i in todo:
                out[i] = {**objects[i], "apiVersion": desired_api_version}
            return out
        converted = await self._webhook(conversion.get("webhook") or {}, [objects[i] for i in todo],
                                        desired_api_version, list_kind)
        out = list(objects)
        for i, c in zip(todo, converted):
            out[i] = c
        return out

    async def _webhook(self, webhook: dict, originals: list[dict], desired: str, list_kind: str | None) -> list[dict]:
        gvk = _gvk({**originals[0], "kind": list_kind} if list_kind else originals[0])
        review_version = next((v for v in webhook.get("conversionReviewVersions") or [] if v in _REVIEW_VERSIONS),
                              None)
        if review_version is None:
            raise ConversionError(f"conversion webhook for {gvk} failed: webhook does not accept v1 or v1beta1 "
                                  "ConversionReview")
        uid = str(uuid.uuid4())
        review_api = f"apiextensions.k8s.io/{review_version}"
        request = {"apiVersion": review_api, "kind": "ConversionReview",
                   "request": {"uid": uid, "desiredAPIVersion": desired, "objects": originals}}
        try:
            answer = await self.client.post(webhook.get("clientConfig") or {}, request, TIMEOUT_SECONDS)
            converted = _converted_objects(answer, review_api, uid)
        except (WebhookError, ConversionError) as e:
            raise ConversionError(f"conversion webhook for {gvk} failed: {e}") from None
        if len(converted) != len(originals):
            raise ConversionError(f"conversion webhook for {gvk} returned {len(converted)} objects, "
                                  f"expected {len(originals)}")
        return [_checked(gvk, i, original, c, desired) for i, (original, c) in enumerate(zip(originals, converted))]


def _converted_objects(answer: dict, review_api: str, uid: str) -> list:
    got = f"{answer.get('apiVersion', '')}, Kind={answer.get('kind', '')}"
    if got != f"{review_api}, Kind=ConversionReview":
        raise ConversionError(f"expected webhook response of {review_api}, Kind=ConversionReview, got {got}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise ConversionError("no response provided")
    if response.get("uid", "") != uid:
        raise ConversionError(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise ConversionError(result["message"])
        raise ConversionError(f"response.result.status was '{result.get('status', '')}', not 'Success'")
    objects = response.get("convertedObjects") or []
    return objects if isinstance(objects, list) else []


def status_error(e: ConversionError):
    """The API error a failed conversion answers with (500, no reason)."""
    from ...machinery.errors import APIError

    return APIError(500, "", str(e))


def _checked(gvk: str, i: int, original: dict, converted: Any, desired: str) -> dict:
    prefix = f"conversion webhook for {gvk} returned invalid converted object at index {i}"
    if not isinstance(converted, dict):
        raise ConversionError(f"{prefix}: Object 'Kind' is missing in the converted object")
    if converted.get("apiVersion") != desired:
        raise ConversionError(f"{prefix}: invalid groupVersion (expected {desired}, received "
                              f"{converted.get('apiVersion', '')})")
    if converted.get("kind") != original.get("kind"):
        raise ConversionError(f"{prefix}: invalid kind (expected {original.get('kind')}, received "
                              f"{converted.get('kind', '')})")
    before, after = _meta(original), _meta(converted)
    for what, key in (("name", "name"), ("namespace", "namespace"), ("UID", "uid")):
        if before.get(key, "") != after.get(key, ""):
            raise ConversionError(f"{prefix}: must have the same {what}: {before.get(key, '')} != {after.get(key, '')}")
    return _restore_metadata(gvk, i, original, converted)


def _restore_metadata(gvk: str, i: int, original: dict, converted: dict) -> dict:
    """The original metadata with the webhook's labels and annotations."""
    after = _meta(converted)
    meta = copy.deepcopy(_meta(original))
    for key in ("labels", "annotations"):
        value = after.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise ConversionError(f"conversion webhook for {gvk} returned invalid metadata in object at index {i}: "
                                  f"invalid metadata of type {type(value).__name__} in {key}")
        if value:
            meta[key] = value
        else:
            meta.pop(key, None)
    errs = validate_labels(meta.get("labels") or {}, "metadata.labels")
    if errs:
        raise ConversionError(f"conversion webhook for {gvk} returned invalid metadata in object at index {i}: "
                              + ", ".join(str(e) for e in errs))
    return {**converted, "metadata": meta}


_server_client: WebhookClient | None = None


def use_client(client: WebhookClient | None) -> None:
    """The API server's webhook client (with its Service resolver), which
    `convert` uses from then on; None goes back to a one-off client per call."""
    global _server_client
    _server_client = client


async def convert(crd: dict, objects: list[dict], desired_api_version: str,
                  client: WebhookClient | None = None, list_kind: str | None = None) -> list[dict]:
    """Convert with `client`, else the API server's (see use_client), else a
    one-off client."""
    client = client or _server_client
    if client is not None:
        return await Converter(client).convert(crd, objects, desired_api_version, list_kind)
    own = WebhookClient()
    try:
        return await Converter(own).convert(crd, objects, desired_api_version, list_kind)
    finally:
        await own.close()
