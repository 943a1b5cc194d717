"""Admission checks that follow from who is asking: NodeRestriction (a node
writes only its own Node, and of it neither its taints nor the labels kept from
kubelets; its own Lease, CSINode and ResourceSlices; mirror pods bound to it and
referencing nothing; the status of its pods, evictions of them; of its pods'
claims only the resize status; service account tokens bound to its pods, for the
audiences they use; kubelet certificates of its own name; pod certificates only
for its own running pods, from the signers their volumes name),
ClusterTrustBundleAttest (a bundle linked to a signer needs `attest` on that
signer), CertificateApproval and CertificateSigning (`approve` and `sign` on a
CertificateSigningRequest's signer)."""

from __future__ import annotations

import json

from ...machinery import errors
from ...machinery.validation import forbidden
from .authorizer import Attributes, decide
from .node import LEASE_NAMESPACE, NODE_PREFIX, node_of, referenced, unknown_node

MIRROR = "kubernetes.io/config.mirror"
CERTS = "certificates.k8s.io"
STORAGE = "storage.k8s.io"
RESOURCE = "resource.k8s.io"


def _forbidden(group: str, plural: str, obj: dict, why: str) -> errors.APIError:
    return errors.forbidden(group, plural, (obj.get("metadata") or {}).get("name", ""), why)


def _restricted(user, group: str, plural: str, name: str) -> str:
    """The node `user` speaks for ("" for a user that is not a node); Forbidden for a node identity
    that names none, whatever it writes, as upstream's Admit refuses it first."""
    node = node_of(user.name, user.groups)
    if not node and unknown_node(user.name, user.groups):
        raise errors.forbidden(group, plural, name, f'could not determine node from user "{user.name}"')
    return node


def node_restriction(lookup, group: str, plural: str, op: str, obj: dict, old: dict | None, user,
                     subresource: str = "") -> None:
    """Raise Forbidden when a node identity writes what is not its own.
    `lookup(group, plural, namespace, name)` reads the watch cache."""
    md = obj.get("metadata") or {}
    node = _restricted(user, group, plural, md.get("name", ""))
    if not node:
        return
    if group == "" and plural == "nodes":
        _node(node, op, obj, old)
    if group == "coordination.k8s.io" and plural == "leases":
        _own_lease(node, md.get("namespace", ""), md.get("name", ""))
    if group == "" and plural == "pods":
        _pod(lookup, node, op, subresource, obj, old)
    if group == "" and plural == "persistentvolumeclaims":
        _claim_status(node, op, subresource, obj, old)
    if group == STORAGE and plural == "csinodes":
        own_csinode(md.get("name", ""), user)
    if group == RESOURCE and plural == "resourceslices" and op == "CREATE" \
            and (obj.get("spec") or {}).get("nodeName") != node:
        raise _forbidden(group, plural, obj, "can only create ResourceSlice with the same NodeName as the requesting node")
    if group == CERTS and plural == "podcertificaterequests" and op == "CREATE":
        _pod_certificate_request(lookup, node, obj)
    if group == CERTS and plural == "certificatesigningrequests" and op == "CREATE":
        _node_csr(node, obj)


#: the signers of a kubelet's own certificates, whose requests a node makes only for itself
_KUBELET_SIGNERS = ("kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet")


def _node_csr(node: str, csr: dict) -> None:
    """admitCSR: a node's request to a kubelet signer names that node (CN=system:node:<node>), so one
    node cannot have a certificate of another's issued (AllowInsecureKubeletCertificateSigningRequests off)."""
    if (csr.get("spec") or {}).get("signerName") not in _KUBELET_SIGNERS:
        return
    from ...pki.csr import common_name, parse_request

    try:
        cn = common_name(parse_request(csr))
    except ValueError as e:
        raise _forbidden(CERTS, "certificatesigningrequests", csr, f"unable to parse csr: {str(e).split(': ', 1)[-1]}")
    if cn != f"{NODE_PREFIX}{node}":
        raise _forbidden(CERTS, "certificatesigningrequests", csr, f"can only create a node CSR with CN={NODE_PREFIX}{node}")


def node_deletion(lookup, group: str, plural: str, obj: dict, user) -> None:
    """NodeRestriction on a DELETE of `obj` (each of a deletecollection's too): a node deletes only
    its own pods (mirror pods), CSINode, Lease and ResourceSlices."""
    md = obj.get("metadata") or {}
    node = _restricted(user, group, plural, md.get("name", ""))
    if not node:
        return
    if group == "" and plural == "pods" and (obj.get("spec") or {}).get("nodeName") != node:
        raise _forbidden(group, plural, obj, f'node "{node}" can only delete pods with spec.nodeName set to itself')
    if group == STORAGE and plural == "csinodes":
        own_csinode(md.get("name", ""), user)
    if group == "coordination.k8s.io" and plural == "leases":
        _own_lease(node, md.get("namespace", ""), md.get("name", ""))
    if group == RESOURCE and plural == "resourceslices" and (obj.get("spec") or {}).get("nodeName") != node:
        raise _forbidden(group, plural, obj, "can only delete ResourceSlice with the same NodeName as the requesting node")


def node_subresource(lookup, group: str, plural: str, subresource: str, namespace: str, name: str, user) -> None:
    """NodeRestriction on a create through a subresource that takes an object of its own (an eviction,
    a binding): admitPodEviction lets a node evict only pods bound to it."""
    node = _restricted(user, group, plural, name)
    if not node or (group, plural, subresource) != ("", "pods", "eviction"):
        return
    pod = lookup("", "pods", namespace, name)
    if pod is None:
        raise errors.not_found("", "pods", name)
    if (pod.get("spec") or {}).get("nodeName") != node:
        raise errors.forbidden("", "pods", name, f"node {node} can only evict pods with spec.nodeName set to itself")


async def node_token_request(authorizer, lookup, namespace: str, name: str, request: dict, user) -> None:
    """admitServiceAccount: a node's TokenRequest is bound to a pod (by name and UID) that is bound
    to the node, so a node mints tokens only for what runs on it; and (ServiceAccountNodeAudienceRestriction,
    on by default since 1.33) for at most one audience, one the pod's volumes use unless the node may
    `request-serviceaccounts-token-audience` on it."""
    node = _restricted(user, "", "serviceaccounts", name)
    if not node:
        return
    ref = (request.get("spec") or {}).get("boundObjectRef") or {}
    if (ref.get("apiVersion"), ref.get("kind")) != ("v1", "Pod") or not ref.get("name"):
        raise errors.forbidden("", "serviceaccounts", name, "node requested token not bound to a pod")
    if not ref.get("uid"):
        raise errors.forbidden("", "serviceaccounts", name, "node requested token with a pod binding without a uid")
    pod = lookup("", "pods", namespace, ref["name"])
    if pod is None:
        raise errors.not_found("", "pods", ref["name"])
    if pod["metadata"].get("uid") != ref["uid"]:
        raise errors.forbidden("", "serviceaccounts", name, f"the UID in the bound object reference ({ref['uid']}) does "
                                                            "not match the UID in record. The object might have been "
                                                            "deleted and then recreated")
    if (pod.get("spec") or {}).get("nodeName") != node:
        raise errors.forbidden("", "serviceaccounts", name, "node requested token bound to a pod scheduled on a "
                                                            "different node")
    audiences = (request.get("spec") or {}).get("audiences") or []
    if len(audiences) > 1:
        raise errors.forbidden("", "serviceaccounts", name, "node may only request 0 or 1 audiences")
    audience = audiences[0] if audiences else ""
    if audience in _pod_audiences(lookup, pod):
        return
    asked = Attributes("request-serviceaccounts-token-audience", "", True, "", "v1", audience, "", namespace, name)
    if authorizer is None or not (await decide(authorizer, user, asked)).allowed:
        raise errors.forbidden("", "serviceaccounts", name, f'audience "{audience}" not found in pod spec volume, '
                                                            f"{user.name} is not authorized to request tokens for "
                                                            "this audience")


def _pod_audiences(lookup, pod: dict) -> set[str]:
    """The token audiences a pod's volumes use: its projected serviceAccountToken sources' ("" for the
    API server's), and the tokenRequests of the CSIDrivers of its CSI volumes, inline or behind a
    claim (an ephemeral volume's too)."""
    spec, ns = pod.get("spec") or {}, pod["metadata"].get("namespace", "")
    out: set[str] = set()
    drivers: set[str] = set()
    for v in spec.get("volumes") or []:
        for src in (v.get("projected") or {}).get("sources") or []:
            if (token := src.get("serviceAccountToken")) is not None:
                out.add(token.get("audience") or "")
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName") or \
            (f"{pod['metadata']['name']}-{v['name']}" if v.get("ephemeral") else "")
        if claim:
            pvc = lookup("", "persistentvolumeclaims", ns, claim) or {}
            pv = lookup("", "persistentvolumes", "", (pvc.get("spec") or {}).get("volumeName") or "") or {}
            drivers.add(((pv.get("spec") or {}).get("csi") or {}).get("driver") or "")
        drivers.add((v.get("csi") or {}).get("driver") or "")
    for driver in drivers - {""}:
        csi = lookup(STORAGE, "csidrivers", "", driver) or {}
        out |= {r.get("audience") or "" for r in (csi.get("spec") or {}).get("tokenRequests") or []}
    return out


def _own_lease(node: str, namespace: str, name: str) -> None:
    """admitLease: only the node's own Lease, in kube-node-lease."""
    if namespace != LEASE_NAMESPACE:
        raise errors.forbidden("coordination.k8s.io", "leases", name,
                               f'can only access leases in the "{LEASE_NAMESPACE}" system namespace')
    if name != node:
        raise errors.forbidden("coordination.k8s.io", "leases", name,
                               "can only access node lease with the same name as the requesting node")


#: the labels a kubelet sets on its Node (IsKubeletLabel), and the label namespaces it may use
_KUBELET_LABELS = frozenset(("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
                             "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "topology.kubernetes.io/zone",
                             "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
                             "failure-domain.beta.kubernetes.io/region", "node.kubernetes.io/instance-type",
                             "beta.kubernetes.io/instance-type"))
_KUBELET_LABEL_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_domain(prefix: str, *domains: str) -> bool:
    return any(prefix == d or prefix.endswith("." + d) for d in domains)


def _forbidden_labels(labels: dict, before: dict) -> list[str]:
    """Of the labels added, removed or changed, those a node may not touch: node-restriction.kubernetes.io
    ones (what steers privileged workloads to a node), and kubernetes.io and k8s.io ones a kubelet
    does not set."""
    changed = {k for k in labels.keys() | before.keys() if labels.get(k) != before.get(k) or (k in labels) != (k in before)}
    out = []
    for key in changed:
        prefix = key.split("/", 1)[0] if "/" in key else ""
        if _in_domain(prefix, "node-restriction.kubernetes.io") or (
                _in_domain(prefix, "kubernetes.io", "k8s.io") and key not in _KUBELET_LABELS
                and not _in_domain(prefix, *_KUBELET_LABEL_DOMAINS)):
            out.append(key)
    return sorted(out)


def _node(node: str, op: str, obj: dict, old: dict | None) -> None:
    """admitNode: a node registers and updates only its own Node, which may not name a
    configSource, nor change its taints or the labels `_forbidden_labels` keeps."""
    md, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = md.get("name", "")
    if name != node:
        raise _forbidden("", "nodes", obj, f'node "{node}" is not allowed to modify node "{name}"')
    if op == "CREATE":
        if spec.get("configSource") is not None:
            raise _forbidden("", "nodes", obj, f'node "{node}" is not allowed to create pods with a non-nil configSource')
        if bad := _forbidden_labels(md.get("labels") or {}, {}):
            raise _forbidden("", "nodes", obj, f'node "{node}" is not allowed to set the following labels: '
                                               f'{", ".join(bad)}')
    elif op == "UPDATE":
        was = (old or {}).get("spec") or {}
        if spec.get("configSource") is not None and spec["configSource"] != was.get("configSource"):
            raise _forbidden("", "nodes", obj, f'node "{node}" is not allowed to update configSource to a new '
                                               "non-nil configSource")
        if (spec.get("taints") or []) != (was.get("taints") or []):
            raise _forbidden("", "nodes", obj, f'node "{node}" is not allowed to modify taints')
        if bad := _forbidden_labels(md.get("labels") or {}, ((old or {}).get("metadata") or {}).get("labels") or {}):
            raise _forbidden("", "nodes", obj, f'is not allowed to modify labels: {", ".join(bad)}')


def _pod(lookup, node: str, op: str, subresource: str, obj: dict, old: dict | None) -> None:
    if subresource == "status":
        _pod_status(node, obj, old or {})
    elif subresource:
        raise _forbidden("", "pods", obj, f"unexpected pod subresource \"{subresource}\", only 'status' and "
                                          "'eviction' are allowed")
    elif op == "CREATE":
        _mirror_pod(lookup, node, obj)
    else:
        raise _forbidden("", "pods", obj, f'unexpected operation "{op}", node "{node}" can only create and delete '
                                          "mirror pods")


def _pod_status(node: str, obj: dict, old: dict) -> None:
    """admitPodStatus: the status of its own pods, neither their labels nor which claims they use."""
    if (old.get("spec") or {}).get("nodeName") != node:
        raise _forbidden("", "pods", obj, f'node "{node}" can only update pod status for pods with spec.nodeName '
                                          "set to itself")
    if ((old.get("metadata") or {}).get("labels") or {}) != ((obj.get("metadata") or {}).get("labels") or {}):
        raise _forbidden("", "pods", obj, f'node "{node}" cannot update labels through pod status')
    claims = [[(s.get("name"), s.get("resourceClaimName")) for s in (p.get("status") or {}).get("resourceClaimStatuses")
               or []] for p in (old, obj)]
    if claims[0] != claims[1]:
        raise _forbidden("", "pods", obj, f'node "{node}" cannot update resource claim statues')


def _mirror_pod(lookup, node: str, pod: dict) -> None:
    """admitPodCreate: a node creates only mirror pods bound to it, owned (as their controller) by
    its Node, that reference no service account, secret, configmap, trust bundle or claim."""
    md, spec = pod.get("metadata") or {}, pod.get("spec") or {}

    def refuse(why: str) -> errors.APIError:
        return _forbidden("", "pods", pod, why)

    if MIRROR not in (md.get("annotations") or {}):
        raise refuse(f'pod does not have "{MIRROR}" annotation, node "{node}" can only create mirror pods')
    if spec.get("nodeName") != node:
        raise refuse(f'node "{node}" can only create pods with spec.nodeName set to itself')
    owners = md.get("ownerReferences") or []
    if len(owners) > 1:
        raise refuse(f'node "{node}" can only create pods with a single owner reference set to itself')
    if not owners or (owners[0].get("apiVersion"), owners[0].get("kind"), owners[0].get("name")) != ("v1", "Node", node):
        raise refuse(f'node "{node}" can only create pods with an owner reference set to itself')
    owner = owners[0]
    if not owner.get("controller"):
        raise refuse(f'node "{node}" can only create pods with a controller owner reference set to itself')
    if owner.get("blockOwnerDeletion"):
        raise refuse(f'node "{node}" must not set blockOwnerDeletion on an owner reference')
    registered = lookup("", "nodes", "", node)
    if registered is None:
        raise errors.not_found("", "nodes", node)
    if owner.get("uid") != registered["metadata"].get("uid"):
        raise refuse(f"node {node} UID mismatch: expected {owner.get('uid', '')} got {registered['metadata'].get('uid', '')}")
    if spec.get("serviceAccountName"):
        raise refuse(f'node "{node}" can not create pods that reference a service account')
    for kind in ("secrets", "configmaps"):
        if referenced(pod, kind):
            raise refuse(f'node "{node}" can not create pods that reference {kind}')
    volumes = spec.get("volumes") or []
    if any(src.get("clusterTrustBundle") for v in volumes for src in (v.get("projected") or {}).get("sources") or []):
        raise refuse(f'node "{node}" can not create pods that reference clustertrustbundles')
    if any(v.get("persistentVolumeClaim") for v in volumes):
        raise refuse(f'node "{node}" can not create pods that reference persistentvolumeclaims')


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


async def node_pod_certificate_signer(authorizer, lookup, obj: dict, user) -> None:
    """NodeRestriction on a node's PodCertificateRequest (1.37): its signer is one a podCertificate
    projected source of the pod names, unless the node may `request-podcertificate-signer` on it (a
    resource of group "" named by the signer, as the token audiences' check asks). Run with the
    validating checks, after `_pod_certificate_request` found the pod on the node: the authorizer may
    ask a webhook. The refusal's words are ours, after the token audiences' check."""
    node = node_of(user.name, user.groups)
    if not node:
        return
    spec, ns = obj.get("spec") or {}, (obj.get("metadata") or {}).get("namespace", "")
    signer = spec.get("signerName") or ""
    pod = lookup("", "pods", ns, spec.get("podName", "")) or {}
    mounted = {(src.get("podCertificate") or {}).get("signerName") for v in (pod.get("spec") or {}).get("volumes") or []
               for src in (v.get("projected") or {}).get("sources") or []}
    if signer in mounted:
        return
    asked = Attributes("request-podcertificate-signer", "", True, "", "v1", signer, "", ns, "")
    if authorizer is None or not (await decide(authorizer, user, asked)).allowed:
        raise _forbidden(CERTS, "podcertificaterequests", obj, f'signer name "{signer}" not found in pod spec volume, '
                                                               f"{user.name} is not authorized to request pod "
                                                               "certificates for this signer")


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

