"""Validation of a webhook `clientConfig` (admissionregistration and
apiextensions share it), with the messages of apiserver's
util/webhook/validation.go."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ...machinery.validation import FieldError, dns1035_label, dns1123_subdomain, invalid, required

_FORM = "; desired format: https://host[/path]"


def validate_url(path: str, url: str) -> list[FieldError]:
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises on a bad port
    except ValueError as e:
        return [required(path, f"url must be a valid URL: {e}{_FORM}")]
    errs: list[FieldError] = []
    if u.scheme != "https":
        errs.append(invalid(path, u.scheme, "'https' is the only allowed URL scheme" + _FORM))
    host = u.netloc.rsplit("@", 1)[-1]
    if not host:
        errs.append(invalid(path, host, "host must be provided" + _FORM))
    if "@" in u.netloc:
        errs.append(invalid(path, u.netloc.rsplit("@", 1)[0], "user information is not permitted in the URL"))
    if u.fragment:
        errs.append(invalid(path, u.fragment, "fragments are not permitted in the URL"))
    if u.query:
        errs.append(invalid(path, u.query, "query parameters are not permitted in the URL"))
    return errs


def validate_service(path: str, svc: dict) -> list[FieldError]:
    errs: list[FieldError] = []
    if not svc.get("name"):
        errs.append(required(f"{path}.name", "service name is required"))
    if not svc.get("namespace"):
        errs.append(required(f"{path}.namespace", "service namespace is required"))
    port = svc.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(invalid(f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    p = svc.get("path")
    if p is None or p in ("", "/"):
        return errs
    if p == "//":
        return errs + [invalid(f"{path}.path", p, "segment[0] may not be empty")]
    if not p.startswith("/"):
        errs.append(invalid(f"{path}.path", p, "must start with a '/'"))
    rest = p[1:]
    if rest.endswith("/"):
        rest = rest[:-1]
    for i, step in enumerate(rest.split("/")):
        if not step:
            errs.append(invalid(f"{path}.path", p, f"segment[{i}] may not be empty"))
            continue
        errs += [invalid(f"{path}.path", p, f"segment[{i}]: {m}") for m in dns1123_subdomain(step)]
    return errs


def validate_client_config(path: str, cc: Any) -> list[FieldError]:
    """Exactly one of url and service, each valid."""
    cc = cc if isinstance(cc, dict) else {}
    has_url, has_svc = cc.get("url") is not None, cc.get("service") is not None
    if has_url == has_svc:
        return [required(path, "exactly one of url or service is required")]
    if has_url:
        return validate_url(f"{path}.url", cc["url"])
    return validate_service(f"{path}.service", cc["service"])


#: the review versions a webhook (admission or CRD conversion) may be sent that this server speaks
REVIEW_VERSIONS = ("v1", "v1beta1")


def validate_review_versions(path: str, versions: list, require_known: bool = True) -> list[FieldError]:
    """A webhook's admissionReviewVersions / conversionReviewVersions: each a DNS-1035 label, none
    twice, and (with `require_known`) one this server speaks among them."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, v in enumerate(versions):
        if v in seen:
            errs.append(invalid(f"{path}[{i}]", v, "duplicate version"))
            continue
        seen.add(v)
        errs += [invalid(f"{path}[{i}]", v, m) for m in dns1035_label(v)]
    if require_known and not any(v in REVIEW_VERSIONS for v in versions):
        errs.append(invalid(path, versions, "must include at least one of v1, v1beta1"))
    return errs
