"""The error every CEL failure is reported with, compile or runtime."""

#: cel-go's cancellation message, for an evaluation over the per-call cost limit
COST_LIMIT_ERROR = "operation cancelled: actual cost limit exceeded"


class CELError(Exception):
    """An expression failed to compile or to evaluate; the message follows
    upstream's (cel-go's and the Kubernetes libraries') wording."""
