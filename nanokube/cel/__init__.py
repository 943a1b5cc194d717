"""Kubernetes' CEL environment, shared by the API server (CRD validation
rules, admission policies, webhook match conditions) and the scheduler (DRA
device selectors).

It runs expressions on the `common-expression-language` engine and adds what
kube-apiserver 1.37's environment has on top of CEL: the Kubernetes libraries
(lists, regex, urls, quantity, ip, cidr, format, semver), cel-go's string,
list, set and math extensions, optional values, a static checker with cel-go's
error wording, a worst-case cost estimate, and a compile cache.

Not expressible on this engine (a compile error names the construct): the
optional syntax `x.?f` and `l[?i]` (optional values themselves work: `oldSelf`
with optionalOldSelf, `optional.of`, `.hasValue()`, `.value()`, `.orValue()`),
two-variable comprehensions and `cel.bind`, and the `authz` library.
"""

from .environment import Environment, Program, Variable
from .errors import CELError

__all__ = ["CELError", "Environment", "Program", "Variable"]
