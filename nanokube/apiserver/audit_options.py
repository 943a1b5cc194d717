"""The audit backends' flags of kube-apiserver (staging/src/k8s.io/apiserver/pkg/server/options/audit.go)
that `nanokube up` takes and hands on to its API workers: the log file's format, mode and rotation,
and the webhook's mode, batching, throttle, backoff and version, with upstream's defaults and its
validation messages. `--audit-log-path` and `--audit-policy-file` stay `up`'s own."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..machinery import goduration
from .audit_file import LogOptions
from .audit_modes import MODES
from .audit_truncate import MAX_BATCH, MAX_EVENT, Truncate

if TYPE_CHECKING:
    from .audit_webhook import WebhookBackend

#: the event versions kube-apiserver 1.37 serializes (--audit-log-version, --audit-webhook-version)
VERSIONS = ("audit.k8s.io/v1",)
FORMATS = ("json", "legacy")


class FlagError(ValueError):
    """A flag value kube-apiserver's validation refuses: `up` does not start."""


class WebhookConfigError(FlagError):
    """--audit-webhook-config-file names a configuration the webhook backend cannot use."""


def go_bool(text: str) -> bool:
    """strconv.ParseBool, as pflag reads a boolean flag's `=value`."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def add_flags(p: argparse.ArgumentParser) -> None:
    """The flags, on `up`'s parser and on each worker's."""
    p.add_argument("--audit-log-format", default="json", metavar="FORMAT",
                   help="json: one audit.k8s.io/v1 Event per line; legacy: one line of text per event")
    p.add_argument("--audit-log-mode", default="blocking", metavar="MODE",
                   help="blocking: each event is written before its request goes on; blocking-strict: a "
                        "RequestReceived event that cannot be written fails its request; batch: written in the "
                        "background")
    _batch_flags(p, "log", 10_000, 1, "0s", False, 0.0, 0)
    _truncate_flags(p, "log")
    p.add_argument("--audit-log-maxsize", type=int, default=100, metavar="MB",
                   help="the size at which the audit log is rotated, renamed with the time (0: never)")
    p.add_argument("--audit-log-maxbackup", type=int, default=100, metavar="N",
                   help="rotated audit logs kept, the newest (0: all)")
    p.add_argument("--audit-log-maxage", type=int, default=366, metavar="DAYS",
                   help="days a rotated audit log is kept, by the time in its name (0: any)")
    p.add_argument("--audit-log-compress", type=go_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="gzip rotated audit logs")
    p.add_argument("--audit-log-version", default=VERSIONS[0], metavar="GROUP/VERSION",
                   help="API group and version of the events written to the log")
    p.add_argument("--audit-webhook-config-file", default=None, metavar="FILE",
                   help="a kubeconfig naming the server every audit event is also POSTed to, as audit.k8s.io/v1 EventLists")
    p.add_argument("--audit-webhook-mode", default="batch", metavar="MODE",
                   help="batch: sent in the background; blocking: before each request goes on and is answered; "
                        "blocking-strict: and a RequestReceived event that cannot be sent fails its request")
    p.add_argument("--audit-webhook-initial-backoff", default="10s", metavar="DURATION",
                   help="how long to wait before retrying the first failed request")
    _batch_flags(p, "webhook", 10_000, 400, "30s", True, 10.0, 15)
    _truncate_flags(p, "webhook")
    p.add_argument("--audit-webhook-version", default=VERSIONS[0], metavar="GROUP/VERSION",
                   help="API group and version of the events sent to the webhook")


def _batch_flags(p: argparse.ArgumentParser, plugin: str, buffer: int, size: int, wait: str, throttle: bool,
                 qps: float, burst: int) -> None:
    """AuditBatchOptions.AddFlags: the batch mode's flags of a backend, with its defaults."""
    flag = f"--audit-{plugin}-batch"
    p.add_argument(f"{flag}-buffer-size", type=int, default=buffer, metavar="N",
                   help="in batch mode, the events held before more are dropped")
    p.add_argument(f"{flag}-max-size", type=int, default=size, metavar="N", help="in batch mode, the most events in a batch")
    p.add_argument(f"{flag}-max-wait", default=wait, metavar="DURATION",
                   help="in batch mode, how long events wait for a batch to fill before it is written")
    p.add_argument(f"{flag}-throttle-enable", type=go_bool, nargs="?", const=True, default=throttle, metavar="BOOL",
                   help="in batch mode, whether batches are throttled")
    p.add_argument(f"{flag}-throttle-qps", type=float, default=qps, metavar="QPS",
                   help="in batch mode, the average number of batches a second")
    p.add_argument(f"{flag}-throttle-burst", type=int, default=burst, metavar="N",
                   help="in batch mode, the batches written at once where the QPS was not used before")


def _batch_options(args: argparse.Namespace, plugin: str) -> tuple[int, int, float, tuple[float, int] | None]:
    """(buffer, max size, max wait, throttle) of a backend in batch mode; FlagError as
    validateBackendBatchOptions words it."""
    get = lambda name: getattr(args, f"audit_{plugin}_batch_{name}")  # noqa: E731
    for what, v in (("buffer size", get("buffer_size")), ("max batch size", get("max_size"))):
        if v <= 0:
            raise FlagError(f"invalid audit batch {plugin} {what} {v}, must be a positive number")
    if get("throttle_enable"):
        for what, v in (("throttle QPS", get("throttle_qps")), ("throttle burst", get("throttle_burst"))):
            if v <= 0:
                raise FlagError(f"invalid audit batch {plugin} {what} {v:g}, must be a positive number")
    try:
        wait = goduration.parse(get("max_wait"), f"--audit-{plugin}-batch-max-wait")
    except ValueError as e:
        raise FlagError(str(e)) from None
    throttle = (get("throttle_qps"), get("throttle_burst")) if get("throttle_enable") else None
    return get("buffer_size"), get("max_size"), wait, throttle


def _truncate_flags(p: argparse.ArgumentParser, plugin: str) -> None:
    """AuditTruncateOptions.AddFlags."""
    flag = f"--audit-{plugin}-truncate"
    p.add_argument(f"{flag}-enabled", type=go_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="whether events too large are truncated (their request and response objects left out)")
    p.add_argument(f"{flag}-max-batch-size", type=int, default=MAX_BATCH, metavar="BYTES",
                   help="the largest batch handed to the backend; a larger one is split")
    p.add_argument(f"{flag}-max-event-size", type=int, default=MAX_EVENT, metavar="BYTES",
                   help="the largest event handed to the backend: a larger one loses its request and response, "
                        "and is dropped if still too large")


def _truncate_options(args: argparse.Namespace, plugin: str) -> Truncate | None:
    """The truncate options where enabled; FlagError as AuditTruncateOptions.Validate words it
    (checked either way, as upstream)."""
    batch, event = (getattr(args, f"audit_{plugin}_truncate_max_{x}_size") for x in ("batch", "event"))
    if event <= 0:
        raise FlagError(f"invalid audit truncate {plugin} max event size {event}, must be a positive number")
    if batch < event:
        raise FlagError(f"invalid audit truncate {plugin} max batch size {batch}, must be greater than max event "
                        f"size ({event})")
    return Truncate(batch, event) if getattr(args, f"audit_{plugin}_truncate_enabled") else None


def log_options(args: argparse.Namespace, enabled: bool = True) -> LogOptions:
    """The log backend's options; FlagError as AuditLogOptions.Validate words it (checked only where
    the log is `enabled`, as upstream)."""
    if enabled:
        _check_mode("log", args.audit_log_mode)
        _check_version(args.audit_log_version)
        if args.audit_log_format not in FORMATS:
            raise FlagError(f'invalid audit log format {args.audit_log_format}, allowed formats are "{",".join(FORMATS)}"')
        for flag in ("maxage", "maxbackup", "maxsize"):
            if (v := getattr(args, f"audit_log_{flag}")) < 0:
                raise FlagError(f"--audit-log-{flag} {v} can't be a negative number")
    batch = _batch_options(args, "log") if enabled and args.audit_log_mode == "batch" else (10_000, 1, 0.0, None)
    truncate = _truncate_options(args, "log") if enabled else None
    return LogOptions(format=args.audit_log_format, mode=args.audit_log_mode, max_size=args.audit_log_maxsize,
                      max_backups=args.audit_log_maxbackup, max_age=args.audit_log_maxage,
                      compress=args.audit_log_compress, batch_buffer=batch[0], batch_max_size=batch[1],
                      batch_max_wait=batch[2], batch_throttle=batch[3], truncate=truncate)


def webhook(args: argparse.Namespace) -> WebhookBackend | None:
    """The webhook backend --audit-webhook-config-file names, or None; FlagError as
    AuditWebhookOptions.Validate words it, WebhookConfigError for its configuration."""
    if not args.audit_webhook_config_file:
        return None
    mode = args.audit_webhook_mode
    _check_mode("webhook", mode)
    # (the batch options are checked in batch mode only, as upstream; their defaults otherwise)
    buffer, size, wait, throttle = _batch_options(args, "webhook") if mode == "batch" else (10_000, 400, 30.0, None)
    truncate = _truncate_options(args, "webhook")
    _check_version(args.audit_webhook_version)
    try:
        backoff = goduration.parse(args.audit_webhook_initial_backoff, "--audit-webhook-initial-backoff")
    except ValueError as e:
        raise FlagError(str(e)) from None
    from .audit_webhook import WebhookBackend, WebhookError  # its client (aiohttp): once the flags are judged

    try:
        return WebhookBackend(args.audit_webhook_config_file, mode, max_batch=size, max_wait=wait, buffer=buffer,
                              initial_backoff=backoff, throttle=throttle, truncate=truncate)
    except WebhookError as e:
        raise WebhookConfigError(f"--audit-webhook-config-file: {e}") from None


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The flags as given to `up`, for each API worker (the webhook's file by its absolute path)."""
    out = []
    for action in _actions():
        value = getattr(args, action.dest)
        if value is None:
            continue
        if action.dest == "audit_webhook_config_file":
            value = os.path.abspath(value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        out += [f"{action.option_strings[0]}={value}"]
    return out


def _actions() -> list[argparse.Action]:
    p = argparse.ArgumentParser(add_help=False)
    add_flags(p)
    return p._actions


def _check_mode(plugin: str, mode: str) -> None:
    if mode not in MODES:
        raise FlagError(f'invalid audit {plugin} mode {mode}, allowed modes are "{",".join(MODES)}"')


def _check_version(gv: str) -> None:
    """schema.ParseGroupVersion, then the known versions."""
    if gv.count("/") > 1:
        raise FlagError(f"unexpected GroupVersion string: {gv}")
    if gv not in VERSIONS:
        raise FlagError("invalid group version, allowed versions are [" + " ".join(f'"{v}"' for v in VERSIONS) + "]")
