"""Upstream's create/update warnings of the kinds other than pods and their templates: Services
(pkg/api/service/warnings.go), PersistentVolumes and claims, Nodes, StorageClasses,
CSIStorageCapacities, RuntimeClasses, Ingresses, NetworkPolicies, Endpoints and EndpointSlices,
TLS Secrets and ServiceAccounts (their strategies'), and the IP and CIDR forms they share
(apimachinery's GetWarningsForIP / GetWarningsForCIDR); texts as upstream's. The IP/CIDR errors are machinery.validation's; these only warn about values
it accepted.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress

from .certificates import pem_blocks
from ..machinery.validation import parse_ip, sloppy_ipv4
from .pod_warnings import (
    DEPRECATED_NODE_LABELS, go_quote, label_selector_warnings, node_selector_term_warnings, pvc_spec_warnings,
)

_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
_STORAGE_CLASS_MSG = 'deprecated since v1.8; use "storageClassName" attribute instead'
_TOPOLOGY_HINTS = "service.kubernetes.io/topology-aware-hints"
_TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
_INGRESS_CLASS = "kubernetes.io/ingress.class"
#: the managed-by label values of the controllers whose Endpoints/EndpointSlices upstream trusts
_ENDPOINTS_CONTROLLER = ("endpoints.kubernetes.io/managed-by", "endpoint-controller")
_SLICE_CONTROLLERS = ("endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io")
_ENFORCE_MOUNTABLE_SECRETS = "kubernetes.io/enforce-mountable-secrets"
_PV_PLUGINS = (
    ("cephfs", "cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("photonPersistentDisk", "photonPersistentDisk", "deprecated in v1.11, non-functional in v1.16+"),
    ("scaleIO", "scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("storageos", "storageOS", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("rbd", "rbd", "deprecated in v1.28, non-functional in v1.31+"),
)


def _parse(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address | None, bool]:
    """(what Go's ParseIPSloppy reads, whether netip.ParseAddr reads it too): IPv4 octets with
    leading zeros are the sloppy parser's alone; a zone neither's."""
    ip = parse_ip(text)
    return (ip, True) if ip is not None else (sloppy_ipv4(text), False)


def _standard(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Go's net.IP String(): an IPv4-mapped IPv6 address as its IPv4 one."""
    return str(ip.ipv4_mapped) if ip.version == 6 and ip.ipv4_mapped is not None else str(ip)


@functools.lru_cache(maxsize=4096)
def _ip_warning(value: str) -> str | None:
    """GetWarningsForIP's text after the path; None for an address in its standard form."""
    ip, strict = _parse(value)
    if ip is None:
        return None
    if not strict or (ip.version == 6 and ip.ipv4_mapped is not None):
        return (f"non-standard IP address {go_quote(value)} will be considered invalid in a future Kubernetes "
                f"release: use {go_quote(_standard(ip))}")
    if ip.version == 6 and str(ip) != value:
        return f"IPv6 address {go_quote(value)} should be in RFC 5952 canonical format ({go_quote(str(ip))})"
    return None


def ip_warnings(path: str, value: object) -> list[str]:
    """GetWarningsForIP."""
    w = _ip_warning(value) if isinstance(value, str) else None
    return [f"{path}: {w}"] if w else []


@functools.lru_cache(maxsize=4096)
def _cidr_warnings(value: str) -> tuple[str, ...]:
    """GetWarningsForCIDR's texts after the path: bits set beyond the prefix length, a form
    netip.ParsePrefix refuses or an IPv4-mapped address, else a non-canonical IPv6 form."""
    addr, slash, bits = value.partition("/")
    ip, strict = _parse(addr) if slash and bits.isascii() and bits.isdigit() else (None, False)
    if ip is None or int(bits) > ip.max_prefixlen:
        return ()
    n = int(bits)
    net = ipaddress.ip_network(f"{ip}/{n}", strict=False)
    masked = net.network_address
    network = f"{_standard(masked)}/{n}"  # Go's IPNet String()
    out = []
    if masked != ip:
        single = f"{_standard(ip)}/{ip.max_prefixlen}"
        out.append(f"CIDR value {go_quote(value)} is ambiguous in this context (should be {go_quote(network)} or "
                   f"{go_quote(single)}?)")
    if not strict or (len(bits) > 1 and bits[0] == "0") or (ip.version == 6 and ip.ipv4_mapped is not None):
        out.append(f"non-standard CIDR value {go_quote(value)} will be considered invalid in a future Kubernetes "
                   f"release: use {go_quote(network)}")
    if not out and ip.version == 6 and f"{ip}/{n}" != value:
        out.append(f"IPv6 CIDR value {go_quote(value)} should be in RFC 5952 canonical format ({go_quote(f'{ip}/{n}')})")
    return tuple(out)


def cidr_warnings(path: str, value: object) -> list[str]:
    """GetWarningsForCIDR."""
    return [f"{path}: {w}" for w in _cidr_warnings(value)] if isinstance(value, str) else []


def service_warnings(svc: dict) -> list[str]:
    """GetWarningsForService (create and update alike)."""
    out = []
    spec = svc.get("spec") or {}
    if _TOPOLOGY_HINTS in ((svc.get("metadata") or {}).get("annotations") or {}):
        out.append(f"annotation {_TOPOLOGY_HINTS} is deprecated, please use {_TOPOLOGY_MODE} instead")
    stype = spec.get("type", "ClusterIP")
    cluster_ip = spec.get("clusterIP", "")
    if cluster_ip and cluster_ip != "None":
        for i, ip in enumerate(spec.get("clusterIPs") or ()):
            out += ip_warnings(f"spec.clusterIPs[{i}]", ip)
    headless = stype == "ClusterIP" and cluster_ip == "None"
    external = spec.get("externalIPs") or ()
    if headless:
        if spec.get("loadBalancerIP"):
            out.append("spec.loadBalancerIP is ignored for headless services")
        if external:
            out.append("spec.externalIPs is ignored for headless services")
        if spec.get("sessionAffinity", "None") != "None":
            out.append("spec.SessionAffinity is ignored for headless services")
    for i, ip in enumerate(external):
        out += ip_warnings(f"spec.externalIPs[{i}]", ip)
    if external and not headless and stype != "ExternalName":
        out.append("spec.externalIPs is deprecated and may no longer be implemented in some clusters")
    if spec.get("loadBalancerIP"):
        out += ip_warnings("spec.loadBalancerIP", spec["loadBalancerIP"])
    for i, cidr in enumerate(spec.get("loadBalancerSourceRanges") or ()):
        out += cidr_warnings(f"spec.loadBalancerSourceRanges[{i}]", cidr)
    if stype == "ExternalName" and external:
        out.append('spec.externalIPs is ignored when spec.type is "ExternalName"')
    if stype != "ExternalName" and spec.get("externalName"):
        out.append('spec.externalName is ignored when spec.type is not "ExternalName"')
    if spec.get("trafficDistribution") == "PreferClose":
        out.append('spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"')
    return out


def _storage_class_annotation(obj: dict) -> list[str]:
    if _BETA_STORAGE_CLASS in ((obj.get("metadata") or {}).get("annotations") or {}):
        return [f"metadata.annotations[{_BETA_STORAGE_CLASS}]: {_STORAGE_CLASS_MSG}"]
    return []


def pv_warnings(pv: dict) -> list[str]:
    """GetWarningsForPersistentVolume (create and update alike)."""
    out = _storage_class_annotation(pv)
    spec = pv.get("spec") or {}
    if spec.get("persistentVolumeReclaimPolicy") == "Recycle":
        out.append("spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the "
                   "recommended approach is to use dynamic provisioning.")
    required = (spec.get("nodeAffinity") or {}).get("required")
    for i, term in enumerate((required or {}).get("nodeSelectorTerms") or ()):
        out += node_selector_term_warnings(term, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]", True)
    for key, name, msg in _PV_PLUGINS:
        if spec.get(key) is not None:
            out.append(f"spec.{name}: {msg}")
    return out


def pvc_warnings(pvc: dict) -> list[str]:
    """GetWarningsForPersistentVolumeClaim (create and update alike)."""
    return _storage_class_annotation(pvc) + pvc_spec_warnings("spec", pvc.get("spec") or {})


def node_warnings(node: dict) -> list[str]:
    """fieldIsDeprecatedWarnings (a Node's create and update)."""
    spec = node.get("spec") or {}
    out = []
    if spec.get("configSource") is not None:
        out.append("spec.configSource: the feature is removed")
    if spec.get("externalID"):
        out.append("spec.externalID: this field is deprecated, and is unused by Kubernetes")
    return out


def storage_class_warnings(sc: dict) -> list[str]:
    """GetWarningsForStorageClass: deprecated node labels in allowedTopologies."""
    out = []
    for i, topo in enumerate(sc.get("allowedTopologies") or ()):
        for j, e in enumerate((topo or {}).get("matchLabelExpressions") or ()):
            if (msg := DEPRECATED_NODE_LABELS.get((e or {}).get("key"))) is not None:
                out.append(f"allowedTopologies[{i}].matchLabelExpressions[{j}].key: {msg}")
    return out


def csi_storage_capacity_warnings(csc: dict) -> list[str]:
    """GetWarningsForCSIStorageCapacity."""
    return label_selector_warnings(csc.get("nodeTopology"), "nodeTopology")


def runtime_class_warnings(rc: dict) -> list[str]:
    """GetWarningsForRuntimeClass: one per deprecated node label in scheduling.nodeSelector."""
    selector = (rc.get("scheduling") or {}).get("nodeSelector") or {}
    return [f"scheduling.nodeSelector: {DEPRECATED_NODE_LABELS[k]}" for k in selector if k in DEPRECATED_NODE_LABELS]


def ingress_warnings(ing: dict) -> list[str]:
    """An Ingress's create: the class annotation without spec.ingressClassName."""
    if _INGRESS_CLASS in ((ing.get("metadata") or {}).get("annotations") or {}) \
            and (ing.get("spec") or {}).get("ingressClassName") is None:
        return [f'annotation "{_INGRESS_CLASS}" is deprecated, please use \'spec.ingressClassName\' instead']
    return []


def network_policy_warnings(np: dict) -> list[str]:
    """networkPolicyWarnings: each ipBlock's cidr and except."""
    out = []
    spec = np.get("spec") or {}
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or ()):
            for j, peer in enumerate((rule or {}).get(peers) or ()):
                block = (peer or {}).get("ipBlock")
                if block is None:
                    continue
                path = f"spec.{direction}[{i}].{peers}[{j}].ipBlock"
                out += cidr_warnings(f"{path}.cidr", block.get("cidr"))
                for k, cidr in enumerate(block.get("except") or ()):
                    out += cidr_warnings(f"{path}.except[{k}]", cidr)
    return out


def endpoints_warnings(ep: dict) -> list[str]:
    """endpointsWarnings: addresses' IPs, except in what the endpoints controller writes."""
    key, value = _ENDPOINTS_CONTROLLER
    if ((ep.get("metadata") or {}).get("labels") or {}).get(key) == value:
        return []
    out = []
    for i, subset in enumerate(ep.get("subsets") or ()):
        for kind in ("addresses", "notReadyAddresses"):
            for j, addr in enumerate((subset or {}).get(kind) or ()):
                out += ip_warnings(f"subsets[{i}].{kind}[{j}].ip", (addr or {}).get("ip"))
    return out


def endpoint_slice_warnings(eps: dict, create: bool = False) -> list[str]:
    """warnOnDeprecatedAddressType (on create) and warnOnBadIPs: endpoints' addresses, except in
    what the slice controllers write."""
    out = ["spec.addressType: FQDN endpoints are deprecated"] if create and eps.get("addressType") == "FQDN" else []
    if ((eps.get("metadata") or {}).get("labels") or {}).get("endpointslice.kubernetes.io/managed-by") \
            in _SLICE_CONTROLLERS:
        return out
    for i, ep in enumerate(eps.get("endpoints") or ()):
        for j, addr in enumerate((ep or {}).get("addresses") or ()):
            out += ip_warnings(f"endpoints[{i}].addresses[{j}]", addr)
    return out


def secret_warnings(secret: dict) -> list[str]:
    """warningsForSecret (create and update alike): a kubernetes.io/tls Secret whose tls.crt and
    tls.key are no key pair gets the error Go's tls.X509KeyPair gives."""
    if secret.get("type") != "kubernetes.io/tls":
        return []
    data = secret.get("data") or {}
    err = _key_pair_error(_decoded(data.get("tls.crt")), _decoded(data.get("tls.key")))
    return [err] if err else []


def _decoded(value: object) -> bytes:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        return b""


def _pem_types(data: bytes) -> list[tuple[str, bytes]]:
    """The (type, DER) of each PEM block pem.Decode yields (one whose body is not base64 is
    passed over, as Decode's retry does)."""
    return [(kind, der) for kind, _, der in pem_blocks(data.decode("latin-1")) if der is not None]


def _key_pair_error(cert_pem: bytes, key_pem: bytes) -> str:
    """crypto/tls X509KeyPair's error ('' when the pair holds): the first certificate and the
    first private key block, parsed and matched. A certificate x509 cannot parse is reported
    with Go's most general parse error."""
    blocks = _pem_types(cert_pem)
    certs = [der for kind, der in blocks if kind == "CERTIFICATE"]
    if not certs:
        skipped = [kind for kind, _ in blocks]
        if not skipped:
            return "tls: failed to find any PEM data in certificate input"
        if len(skipped) == 1 and skipped[0].endswith("PRIVATE KEY"):
            return ("tls: failed to find certificate PEM data in certificate input, but did find a private key; "
                    "PEM inputs may have been switched")
        return ('tls: failed to find "CERTIFICATE" PEM block in certificate input after skipping PEM blocks of the '
                f"following types: [{' '.join(skipped)}]")
    key_der, skipped = None, []
    for kind, der in _pem_types(key_pem):
        if kind == "PRIVATE KEY" or kind.endswith(" PRIVATE KEY"):
            key_der = der
            break
        skipped.append(kind)
    if key_der is None:
        if not skipped:
            return "tls: failed to find any PEM data in key input"
        if skipped == ["CERTIFICATE"]:
            return "tls: found a certificate rather than a key in the PEM for the private key"
        return ('tls: failed to find PEM block with type ending in "PRIVATE KEY" in key input after skipping PEM '
                f"blocks of the following types: [{' '.join(skipped)}]")
    return _parsed_pair_error(certs[0], key_der)


def _parsed_pair_error(cert_der: bytes, key_der: bytes) -> str:
    """X509KeyPair's parsing and matching of the first certificate and key: RSA moduli, EC points
    or Ed25519 keys compared (cryptography is imported here, where a TLS Secret needs it, not at
    the registry's import)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        public = x509.load_der_x509_certificate(cert_der).public_key()
    except ValueError:
        return "x509: malformed certificate"
    try:
        private = serialization.load_der_private_key(key_der, None)
    except (ValueError, TypeError):
        return "tls: failed to parse private key"
    if not isinstance(private, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)):
        return "tls: found unknown private key type in PKCS#8 wrapping"
    identities = (
        (rsa.RSAPublicKey, rsa.RSAPrivateKey, lambda k: k.public_numbers().n),
        (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey, lambda k: (k.public_numbers().x, k.public_numbers().y)),
        (ed25519.Ed25519PublicKey, ed25519.Ed25519PrivateKey,
         lambda k: k.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)),
    )
    for pub_type, priv_type, identity in identities:
        if isinstance(public, pub_type):
            if not isinstance(private, priv_type):
                return "tls: private key type does not match public key type"
            return "" if identity(private.public_key()) == identity(public) else "tls: private key does not match public key"
    return "tls: unknown public key algorithm"


def service_account_warnings(sa: dict, old: dict | None = None) -> list[str]:
    """warnIfHasEnforceMountableSecretsAnnotation: the annotation (any value) set by this request
    is deprecated; an update that finds it already set says nothing."""
    def has(o: dict | None) -> bool:
        return _ENFORCE_MOUNTABLE_SECRETS in (((o or {}).get("metadata") or {}).get("annotations") or {})

    if not has(sa) or has(old):
        return []
    return [f"metadata.annotations[{_ENFORCE_MOUNTABLE_SECRETS}]: deprecated in v1.32+; prefer separate namespaces "
            "to isolate access to mounted secrets"]
