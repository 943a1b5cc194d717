"""The error every CEL failure is reported with, compile or runtime."""


class CELError(Exception):
    """An expression failed to compile or to evaluate; the message follows
    upstream's (cel-go's and the Kubernetes libraries') wording."""
