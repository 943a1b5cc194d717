"""Admission checks that follow from who is asking: NodeRestriction (a node
writes only its own Node, Lease, CSINode and pods, of its pods' claims only the
resize status, and requests pod certificates only for its own running pods),
ClusterTrustBundleAttest (a bundle linked to a signer needs `attest` on that
signer), CertificateApproval and CertificateSigning (`approve` and `sign` on a
CertificateSigningRequest's signer)."""

from __future__ import annotations

import json

from ...machinery import errors
from ...machinery.validation import forbidden
from .authorizer import Attributes, decide
from .node import LEASE_NAMESPACE, node_of

MIRROR = "kubernetes.io/config.mirror"
CERTS = "certificates.k8s.io"
STORAGE = "storage.k8s.io"


def _forbidden(group: str, plural: str, obj: dict, why: str) -> errors.APIError:
    return errors.forbidden(group, plural, (obj.get("metadata") or {}).get("name", ""), why)


def node_restriction(lookup, group: str, plural: str, op: str, obj: dict, old: dict | None, user,
                     subresource: str = "") -> None:
    """Raise Forbidden when a node identity writes what is not its own.
    `lookup(group, plural, namespace, name)` reads the watch cache."""
    node = node_of(user.name, user.groups)
    if not node:
        return
    md = obj.get("metadata") or {}
    if group == "" and plural == "nodes" and md.get("name") != node:
        raise _forbidden(group, plural, obj, f'node "{node}" is not allowed to modify node "{md.get("name", "")}"')
    if group == "coordination.k8s.io" and plural == "leases" and md.get("namespace") == LEASE_NAMESPACE \
            and md.get("name") != node:
        raise _forbidden(group, plural, obj, "can only access node lease with the same name as the requesting node")
    if group == "" and plural == "pods":
        _pod(node, op, obj, old)
    if group == "" and plural == "persistentvolumeclaims":
        _claim_status(node, op, subresource, obj, old)
    if group == STORAGE and plural == "csinodes":
        own_csinode(md.get("name", ""), user)
    if group == CERTS and plural == "podcertificaterequests" and op == "CREATE":
        _pod_certificate_request(lookup, node, obj)


def _pod(node: str, op: str, obj: dict, old: dict | None) -> None:
    if op == "CREATE":
        if MIRROR not in ((obj.get("metadata") or {}).get("annotations") or {}):
            raise _forbidden("", "pods", obj, f'pod does not have "{MIRROR}" annotation, node "{node}" can only '
                                              "create mirror pods")
        if (obj.get("spec") or {}).get("nodeName") != node:
            raise _forbidden("", "pods", obj, f'node "{node}" can only create pods with spec.nodeName set to itself')
    elif ((old or {}).get("spec") or {}).get("nodeName") != node:
        raise _forbidden("", "pods", obj, f'node "{node}" can only update pod status for pods with spec.nodeName '
                                          "set to itself")


def own_csinode(name: str, user) -> None:
    """admitCSINode: a node creates, changes and deletes only the CSINode named after it."""
    node = node_of(user.name, user.groups)
    if node and name != node:
        raise errors.forbidden(STORAGE, "csinodes", name, "can only access CSINode with the same name as the "
                                                          "requesting node")


#: what a node may change of a claim, through its status (the kubelet's volume expansion)
_CLAIM_STATUS_BY_NODE = ("capacity", "conditions", "allocatedResources", "allocatedResourceStatuses")


def _claim_status(node: str, op: str, subresource: str, obj: dict, old: dict | None) -> None:
    """admitPVCStatus: a node writes only the status of a claim, and there only the fields the
    kubelet's expansion sets; metadata (bar resourceVersion and managedFields), spec and the
    rest of status stay as they are. Upstream's message names two of the four fields."""
    if subresource != "status":
        raise _forbidden("", "persistentvolumeclaims", obj, "may only update PVC status")
    if op != "UPDATE":
        raise _forbidden("", "persistentvolumeclaims", obj, f'unexpected operation "{op}"')
    before, after = _without_node_fields(old or {}), _without_node_fields(obj)
    if before != after:
        diff = "\n".join(f"{sign}\t{path}: {json.dumps(value, sort_keys=True)}"
                         for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)
                         for sign, value in (("-", before.get(path)), ("+", after.get(path))))
        raise _forbidden("", "persistentvolumeclaims", obj, f'node "{node}" is not allowed to update fields other '
                                                            f"than status.capacity and status.conditions: {diff}")


def _without_node_fields(claim: dict) -> dict:
    """The claim's top-level fields and those of metadata and status, by path, less what a node
    may change or what does not count (resourceVersion, managedFields)."""
    out = {k: v for k, v in claim.items() if k not in ("metadata", "status")}
    for part, skip in (("metadata", ("resourceVersion", "managedFields")), ("status", _CLAIM_STATUS_BY_NODE)):
        out |= {f"{part}.{k}": v for k, v in (claim.get(part) or {}).items() if k not in skip}
    return out


def _pod_certificate_request(lookup, node: str, obj: dict) -> None:
    spec, ns = obj.get("spec") or {}, (obj.get("metadata") or {}).get("namespace", "")

    def refuse(why: str) -> errors.APIError:
        return _forbidden(CERTS, "podcertificaterequests", obj, why)

    if spec.get("nodeName") != node:
        raise refuse(f'PodCertificateRequest.Spec.NodeName="{spec.get("nodeName", "")}", which is not the '
                     f'requesting node "{node}"')
    pod = lookup("", "pods", ns, spec.get("podName", ""))
    if pod is None:
        raise refuse(f'PodCertificateRequest.Spec.PodName="{spec.get("podName", "")}", which does not exist')
    pspec = pod.get("spec") or {}
    if pod["metadata"].get("uid") != spec.get("podUID"):
        raise refuse(f'PodCertificateRequest.Spec.PodUID="{spec.get("podUID", "")}", which does not match the '
                     f'UID of pod "{spec.get("podName")}"')
    if pspec.get("nodeName") != node:
        raise refuse(f'pod "{spec.get("podName")}" is not bound to node "{node}"')
    if (pod.get("status") or {}).get("phase", "Pending") not in ("Pending", "Running"):
        raise refuse(f'pod "{spec.get("podName")}" is not Pending or Running')
    sa_name = pspec.get("serviceAccountName") or "default"
    if spec.get("serviceAccountName") != sa_name:
        raise refuse(f'PodCertificateRequest.Spec.ServiceAccountName="{spec.get("serviceAccountName", "")}", which '
                     f'is not the service account of pod "{spec.get("podName")}"')
    sa = lookup("", "serviceaccounts", ns, sa_name)
    if sa is None or sa["metadata"].get("uid") != spec.get("serviceAccountUID"):
        raise refuse(f'PodCertificateRequest.Spec.ServiceAccountUID="{spec.get("serviceAccountUID", "")}", which '
                     f'does not match the UID of service account "{sa_name}"')
    node_obj = lookup("", "nodes", "", node)
    if node_obj is None or node_obj["metadata"].get("uid") != spec.get("nodeUID"):
        raise refuse(f'PodCertificateRequest.Spec.NodeUID="{spec.get("nodeUID", "")}", which does not match the '
                     f'UID of node "{node}"')


async def attest(authorizer, obj: dict, old: dict | None, user) -> None:
    """ClusterTrustBundleAttest: writing a bundle for signer S needs verb
    `attest` on signers/S or signers/<domain>/*. An update that changes
    neither the signer nor the bundle needs nothing."""
    spec = obj.get("spec") or {}
    signer = spec.get("signerName") or ""
    if not signer:
        return
    if old is not None and (old.get("spec") or {}).get("signerName") == signer \
            and (old.get("spec") or {}).get("trustBundle") == spec.get("trustBundle"):
        return
    if not await authorized_for_signer(authorizer, user, "attest", signer):
        raise _forbidden(CERTS, "clustertrustbundles", obj, f'user not permitted to attest for signerName "{signer}"')


async def authorized_for_signer(authorizer, user, verb: str, signer: str) -> bool:
    """IsAuthorizedForSignerName: `verb` on signers/<signer>, or on signers/<its domain>/*."""
    for name in (signer, signer.split("/", 1)[0] + "/*"):
        if (await decide(authorizer, user, Attributes(verb, "", True, CERTS, "", "signers", "", "", name))).allowed:
            return True
    return False


async def certificate_signers(authorizer, subresource: str, obj: dict, old: dict, user) -> None:
    """CertificateApproval and CertificateSigning: approving a CertificateSigningRequest (/approval)
    needs `approve` on its signer; changing its certificate or conditions through /status needs `sign`."""
    if subresource == "approval":
        verb, signer = "approve", (obj.get("spec") or {}).get("signerName") or ""
    elif subresource == "status":
        new_status, old_status = obj.get("status") or {}, old.get("status") or {}
        if (new_status.get("certificate") or "") == (old_status.get("certificate") or "") \
                and (new_status.get("conditions") or []) == (old_status.get("conditions") or []):
            return
        verb, signer = "sign", (old.get("spec") or {}).get("signerName") or ""
    else:
        return
    if not await authorized_for_signer(authorizer, user, verb, signer):
        raise _forbidden(CERTS, "certificatesigningrequests", obj, f'user not permitted to {verb} requests with signerName "{signer}"')


async def pod_certificate_signer(authorizer, obj: dict, old: dict, user) -> None:
    """The PodCertificateRequest status strategy's check (upstream's is in its registry, after the
    status validation, not in CertificateSigning admission): any change to the status needs `sign`
    on the stored signer; refused as Invalid on spec.signerName."""
    if (obj.get("status") or {}) == (old.get("status") or {}):
        return
    signer = (old.get("spec") or {}).get("signerName") or ""
    if not await authorized_for_signer(authorizer, user, "sign", signer):
        raise errors.invalid(CERTS, "PodCertificateRequest", (obj.get("metadata") or {}).get("name", ""), [
            forbidden("spec.signerName", f'User "{user.name}" is not permitted to "sign" for signer "{signer}"')])

