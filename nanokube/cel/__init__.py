"""Kubernetes' CEL environment, shared by the API server (CRD validation
rules, admission policies, webhook match conditions) and the scheduler (DRA
device selectors).

It runs expressions on the `common-expression-language` engine and adds what
kube-apiserver 1.37's environment has on top of CEL: the Kubernetes libraries
(lists, regex, urls, quantity, ip, cidr, format, semver), cel-go's string,
list, set and math extensions, optional values, a static checker with cel-go's
error wording, a worst-case cost estimate, and a compile cache.

The engine lacks some syntax; `desugar` rewrites the optional syntax `x.?f`
and `l[?i]`, two-variable comprehensions (`all`/`exists`/`exists_one`,
`transformList`/`transformMap`/`transformMapEntry`), `sortBy`, `cel.bind` and
typed object construction into forms it runs. The `authz` library checks
through an authorizer the API server binds (`library.authz.Authz`); CRD rules
declare no `authorizer`, as upstream's do not. The engine refuses nesting
deeper than 96 levels, where cel-go allows 250.
"""

from .environment import Environment, Program
from .errors import CELError

__all__ = ["CELError", "Environment", "Program"]
