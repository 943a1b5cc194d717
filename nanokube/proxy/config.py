"""KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1): the file `nanokube proxy --config`
reads and `--write-config-to` writes, as kube-proxy treats it (pkg/proxy/apis/config): decoded
(unknown fields tolerated with a warning, as its lenient v1alpha1 decoding does), defaulted as
v1alpha1 defaults it, converted to the settings the proxy runs with (the sync periods and
masqueradeAll of the mode's own section; clusterCIDR split into the detector's CIDRs) and
validated with upstream's words under its internal field paths.

Only the fields nanokube acts on reach `ProxyConfig`: mode, bindAddress, healthzBindAddress,
metricsBindAddress, hostnameOverride, clientConnection.{kubeconfig,qps,burst}, nodePortAddresses,
clusterCIDR, detectLocalMode, detectLocal.*, {nftables,iptables}.{syncPeriod,minSyncPeriod,masqueradeAll}
and configSyncPeriod (validated); the rest of the file (conntrack, ipvs, winkernel, logging, ...) is read, left alone,
as a kube-proxy in nftables mode leaves most of it, and written back by --write-config-to."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..machinery import configfile, goduration
from ..machinery.configfile import ANY, DURATION, Kind, Map, Struct
from ..machinery.validation import FieldError, Stringer, invalid
from .detect_local import CLUSTER_CIDR, DetectLocal
from .nodeport_addresses import PRIMARY

log = logging.getLogger(__name__)

GROUP = "kubeproxy.config.k8s.io"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "KubeProxyConfiguration"
_PATH = "KubeProxyConfiguration"
HEALTHZ_PORT, METRICS_PORT = 10256, 10249
_SECONDS = 1_000_000_000


class ConfigError(ValueError):
    """A file kube-proxy would not load, in its words."""


@dataclass(frozen=True)
class ProxyConfig:
    """The settings `nanokube proxy` runs with, from its flags or a configuration file."""

    mode: str = ""
    hostname_override: str = ""
    bind_address: str = "0.0.0.0"
    healthz_bind_address: str = f"0.0.0.0:{HEALTHZ_PORT}"
    metrics_bind_address: str = f"127.0.0.1:{METRICS_PORT}"
    sync_period: float = 30.0
    min_sync_period: float = 1.0
    config_sync_period: float = 900.0
    masquerade_all: bool = False
    #: nodePortAddresses: CIDRs or ["primary"] (nodeport_addresses.py); empty: every local address
    nodeport_addresses: tuple[str, ...] = ()
    detect_local: DetectLocal = field(default_factory=DetectLocal)
    kubeconfig: str = ""
    #: clientConnection.qps and burst: the client's token bucket (client/ratelimit.py)
    qps: float = 5.0
    burst: int = 10
    #: featureGates (--feature-gates): (name, value) pairs, set on the process's gates once complete
    feature_gates: tuple[tuple[str, bool], ...] = ()
    #: the defaulted v1alpha1 file it came from (None: the flags'), for --write-config-to to write
    #: back the fields nanokube only carries (conntrack, ipvs, masqueradeBit, ...)
    document: dict | None = field(default=None, compare=False, repr=False)

    def validate(self) -> list[FieldError]:
        """Upstream's Validate for the fields nanokube acts on, in its order."""
        errs: list[FieldError] = []
        if self.burst < 0:
            errs.append(invalid(f"{_PATH}.ClientConnection.Burst", self.burst, "must be greater than or equal to 0"))
        if self.config_sync_period <= 0:
            errs.append(invalid(f"{_PATH}.ConfigSyncPeriod", _duration(self.config_sync_period),
                                "must be greater than 0"))
        if self.sync_period <= 0:
            errs.append(invalid(f"{_PATH}.SyncPeriod", _duration(self.sync_period), "must be greater than 0"))
        if self.min_sync_period < 0:
            errs.append(invalid(f"{_PATH}.MinSyncPeriod", _duration(self.min_sync_period),
                                "must be greater than or equal to 0"))
        if self.min_sync_period > self.sync_period:
            errs.append(invalid(f"{_PATH}.SyncPeriod", _duration(self.min_sync_period),
                                f"must be greater than or equal to {_PATH}.MinSyncPeriod"))
        if not _is_ip(self.bind_address):
            errs.append(invalid(f"{_PATH}.BindAddress", self.bind_address,
                                "not a valid textual representation of an IP address"))
        if self.healthz_bind_address:
            errs += _host_port(self.healthz_bind_address, f"{_PATH}.HealthzBindAddress")
        errs += _host_port(self.metrics_bind_address, f"{_PATH}.MetricsBindAddress")
        return errs + _nodeport_addresses(self.nodeport_addresses) + self.detect_local.validate()


def _duration(seconds: float) -> Stringer:
    """A metav1.Duration: its String() in errors (unquoted) and its JSON in files."""
    return Stringer(goduration.string(round(seconds * _SECONDS)))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _host_port(text: str, path: str) -> list[FieldError]:
    """validateHostPort: net.SplitHostPort, then the IP and the port."""
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if not sep or (":" in host and not bracketed) or ("[" in host and not bracketed):
        return [invalid(path, text, "must be IP:port")]
    host = host[1:-1] if bracketed else host
    errs = [] if _is_ip(host) else [invalid(path, host, "must be a valid IP")]
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        errs.append(invalid(path, port, "must be a valid port"))
    return errs


def _nodeport_addresses(addresses: tuple[str, ...]) -> list[FieldError]:
    """validateKubeProxyNodePortAddress: CIDRs, or `primary` alone."""
    errs = []
    for i, a in enumerate(addresses):
        path = f"{_PATH}.NodePortAddresses[{i}]"
        if a == PRIMARY:
            if i != 0 or len(addresses) != 1:
                errs.append(invalid(path, a, "can't use both 'primary' and CIDRs"))
            break
        try:
            valid = "/" in a and bool(ipaddress.ip_network(a, strict=False))
        except ValueError:
            valid = False
        if not valid:
            errs.append(invalid(path, a, "must be a valid CIDR"))
    return errs


def _append_port(address: str, port: int) -> str:
    """AppendPortIfNeeded: an address that is a bare IP gets the default port."""
    if not _is_ip(address.strip("[]")):
        return address
    return f"[{address.strip('[]')}]:{port}" if ":" in address else f"{address}:{port}"


def defaulted(doc: dict) -> dict:
    """A v1alpha1 object with SetDefaults_KubeProxyConfiguration's defaults filled in (a copy)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    out["apiVersion"], out["kind"] = API_VERSION, KIND
    out["bindAddress"] = out.get("bindAddress") or "0.0.0.0"
    v4 = ":" not in out["bindAddress"]
    healthz, metrics = ("0.0.0.0", "127.0.0.1") if v4 else ("[::]", "[::1]")
    out["healthzBindAddress"] = _append_port(out["healthzBindAddress"], HEALTHZ_PORT) \
        if out.get("healthzBindAddress") else f"{healthz}:{HEALTHZ_PORT}"
    out["metricsBindAddress"] = _append_port(out["metricsBindAddress"], METRICS_PORT) \
        if out.get("metricsBindAddress") else f"{metrics}:{METRICS_PORT}"
    for key, value in (("hostnameOverride", ""), ("mode", ""), ("clusterCIDR", ""), ("detectLocalMode", ""),
                       ("enableProfiling", False), ("bindAddressHardFail", False), ("portRange", ""),
                       ("showHiddenMetricsForVersion", ""), ("nodePortAddresses", None), ("featureGates", {})):
        out.setdefault(key, value)
    if out.get("oomScoreAdj") is None:
        out["oomScoreAdj"] = -999
    if not _seconds_of(out.get("configSyncPeriod")):
        out["configSyncPeriod"] = "15m0s"
    client = out.setdefault("clientConnection", {})
    client.setdefault("kubeconfig", "")
    client.setdefault("acceptContentTypes", "")
    client["contentType"] = client.get("contentType") or "application/vnd.kubernetes.protobuf"
    client["qps"] = client.get("qps") or 5
    client["burst"] = client.get("burst") or 10
    for section in ("iptables", "nftables"):
        s = out.setdefault(section, {})
        s.setdefault("masqueradeAll", False)
        if s.get("masqueradeBit") is None:
            s["masqueradeBit"] = 14
        if not _seconds_of(s.get("syncPeriod")):
            s["syncPeriod"] = "30s"
        if not _seconds_of(s.get("minSyncPeriod")):
            s["minSyncPeriod"] = "1s"
    out["iptables"].setdefault("localhostNodePorts", True)
    ipvs = out.setdefault("ipvs", {})
    if not _seconds_of(ipvs.get("syncPeriod")):
        ipvs["syncPeriod"] = "30s"
    local = out.setdefault("detectLocal", {})
    local.setdefault("bridgeInterface", "")
    local.setdefault("interfaceNamePrefix", "")
    conntrack = out.setdefault("conntrack", {})
    for key, value in (("maxPerCore", 32768), ("min", 131072), ("tcpEstablishedTimeout", "24h0m0s"),
                       ("tcpCloseWaitTimeout", "1h0m0s")):
        if conntrack.get(key) is None:
            conntrack[key] = value
    return out


def _seconds_of(value) -> float:
    """A metav1.Duration's JSON ("30s", "1m0s"), which the decoding parsed; unset is 0."""
    return goduration.parse(value) if value else 0.0


def from_v1alpha1(doc: dict) -> ProxyConfig:
    """The defaulted file converted to the settings run (Convert_v1alpha1_KubeProxyConfiguration_To_config_...)."""
    d = defaulted(doc)
    mode = d.get("mode") or ""
    section = d["nftables"] if mode == "nftables" else d["iptables"]
    cidrs = tuple(d["clusterCIDR"].split(",")) if d.get("clusterCIDR") else ()
    local = DetectLocal(d.get("detectLocalMode") or CLUSTER_CIDR, cidrs, d["detectLocal"].get("bridgeInterface", ""),
                        d["detectLocal"].get("interfaceNamePrefix", ""))
    return ProxyConfig(
        mode=mode, hostname_override=d.get("hostnameOverride") or "", bind_address=d["bindAddress"],
        healthz_bind_address=d["healthzBindAddress"], metrics_bind_address=d["metricsBindAddress"],
        sync_period=_seconds_of(section["syncPeriod"]), min_sync_period=_seconds_of(section["minSyncPeriod"]),
        config_sync_period=_seconds_of(d["configSyncPeriod"]),
        masquerade_all=bool(section.get("masqueradeAll")), detect_local=local,
        nodeport_addresses=tuple(d.get("nodePortAddresses") or ()),
        kubeconfig=d["clientConnection"].get("kubeconfig") or "", qps=float(d["clientConnection"]["qps"]),
        burst=d["clientConnection"]["burst"], feature_gates=tuple(sorted((d.get("featureGates") or {}).items())),
        document=d)


def to_v1alpha1(cfg: ProxyConfig) -> dict:
    """The configuration as kube-proxy's --write-config-to encodes its internal one: the file it
    loaded (defaulted, unknown fields dropped) with the settings run put back. The internal
    configuration holds one syncPeriod, minSyncPeriod and masqueradeAll, so only the mode's
    section gets them; the other modes' come out zero ("0s", false), as upstream writes them."""
    out = dict(defaulted(cfg.document or {}))
    mode_section = cfg.mode if cfg.mode in ("nftables", "ipvs") else "iptables"
    masquerade_section = "nftables" if cfg.mode == "nftables" else "iptables"
    for name in ("iptables", "ipvs", "nftables"):
        run = name == mode_section
        out[name].update(syncPeriod=str(_duration(cfg.sync_period if run else 0)),
                         minSyncPeriod=str(_duration(cfg.min_sync_period if run else 0)))
        if name != "ipvs":
            out[name]["masqueradeAll"] = cfg.masquerade_all and name == masquerade_section
    out.update({"mode": cfg.mode, "hostnameOverride": cfg.hostname_override, "bindAddress": cfg.bind_address,
                "healthzBindAddress": cfg.healthz_bind_address,  # empty: off, which defaulting would undo
                "metricsBindAddress": cfg.metrics_bind_address,
                "configSyncPeriod": str(_duration(cfg.config_sync_period)),
                "nodePortAddresses": list(cfg.nodeport_addresses) or None,
                "clusterCIDR": ",".join(cfg.detect_local.cluster_cidrs), "detectLocalMode": cfg.detect_local.mode,
                "featureGates": dict(cfg.feature_gates)})
    out["detectLocal"].update(bridgeInterface=cfg.detect_local.bridge_interface,
                              interfaceNamePrefix=cfg.detect_local.interface_name_prefix)
    out["clientConnection"].update(kubeconfig=cfg.kubeconfig, burst=cfg.burst,
                                   qps=int(cfg.qps) if cfg.qps.is_integer() else cfg.qps)
    return _sorted(out)


def _sorted(value):
    """Keys in order, as Go's JSON of a struct, through sigs.k8s.io/yaml, lists them."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return value


def dump(cfg: ProxyConfig) -> str:
    return yaml.safe_dump(to_v1alpha1(cfg), default_flow_style=False, sort_keys=True)


#: the file's fields and their Go types (configfile's schema: v1alpha1's structs; logging, component-base's
#: LoggingConfiguration, is kept as it is)
_PERIODS = {"syncPeriod": DURATION, "minSyncPeriod": DURATION}
_SCHEMA = Struct("v1alpha1.KubeProxyConfiguration", {
    "apiVersion": str, "kind": str, "featureGates": Map(bool), "logging": ANY, "hostnameOverride": str,
    "bindAddress": str, "healthzBindAddress": str, "metricsBindAddress": str, "bindAddressHardFail": bool,
    "enableProfiling": bool, "showHiddenMetricsForVersion": str, "mode": "v1alpha1.ProxyMode",
    "detectLocalMode": "v1alpha1.LocalMode", "clusterCIDR": str, "nodePortAddresses": [str], "oomScoreAdj": int,
    "configSyncPeriod": DURATION, "portRange": str, "windowsRunAsService": bool,
    "clientConnection": Struct("v1alpha1.ClientConnectionConfiguration", {
        "kubeconfig": str, "acceptContentTypes": str, "contentType": str, "qps": "float32", "burst": int}),
    "iptables": Struct("v1alpha1.KubeProxyIPTablesConfiguration", {
        **_PERIODS, "masqueradeBit": int, "masqueradeAll": bool, "localhostNodePorts": bool}),
    "nftables": Struct("v1alpha1.KubeProxyNFTablesConfiguration", {**_PERIODS, "masqueradeBit": int, "masqueradeAll": bool}),
    "ipvs": Struct("v1alpha1.KubeProxyIPVSConfiguration", {
        **_PERIODS, "scheduler": str, "excludeCIDRs": [str], "strictARP": bool, "tcpTimeout": DURATION,
        "tcpFinTimeout": DURATION, "udpTimeout": DURATION}),
    "winkernel": Struct("v1alpha1.KubeProxyWinkernelConfiguration", {
        "networkName": str, "sourceVip": str, "enableDSR": bool, "rootHnsEndpointName": str,
        "forwardHealthCheckVip": bool}),
    "detectLocal": Struct("v1alpha1.DetectLocalConfiguration", {"bridgeInterface": str, "interfaceNamePrefix": str}),
    "conntrack": Struct("v1alpha1.KubeProxyConntrackConfiguration", {
        "maxPerCore": int, "min": int, "tcpEstablishedTimeout": DURATION, "tcpCloseWaitTimeout": DURATION,
        "tcpBeLiberal": bool, "udpTimeout": DURATION, "udpStreamTimeout": DURATION}),
})
#: the file kind as kube-proxy's scheme decodes it
FILE = Kind(API_VERSION, KIND, "pkg/proxy/apis/config/scheme/scheme.go:29", _SCHEMA)


def load(path: str | Path) -> ProxyConfig:
    """The file at `path`, decoded as kube-proxy's loadConfig does; ConfigError in its words."""
    try:
        data = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"open {path}: {e.strerror.lower() if e.strerror else e}") from None
    try:
        doc, strict = configfile.decode(data, FILE, lenient=True)
    except configfile.DecodeError as e:
        raise ConfigError(f"failed to decode: {e}") from None
    if strict:  # the strict decoder's error; the lenient v1alpha1 decoding goes on (the later key, no unknown ones)
        log.warning("Using lenient decoding as strict decoding failed: err=%s", configfile.strict_error(strict))
    return from_v1alpha1(doc)
