"""The types admission CEL declares by hand: `request` (upstream's BuildRequestType),
`namespaceObject` (BuildNamespaceType) and a policy's `variables`, objects whose fields are
listed here rather than read from a schema. The API server's admission compiles with them and
the ValidatingAdmissionPolicy status controller type-checks with them."""

from __future__ import annotations

from typing import Callable

from .library.authz import AUTHORIZER
from .types import BOOL, DYN, INT, STRING, Type, list_of, map_of


class Fields(dict):
    """An object's fields by name: the type each holds."""


def declared(**fields: Type) -> Type:
    return Type("object", schema=Fields(fields))


def field_type(otherwise: Callable[[Type, str], Type | None]) -> Callable[[Type, str], Type | None]:
    """A field_type for an Environment: the listed fields of a declared object (None for one it
    lacks, which the checker reports as an undefined field), `otherwise` for any other object."""
    def typed(obj: Type, name: str) -> Type | None:
        if isinstance(obj.schema, Fields):
            return obj.schema.get(name)
        return otherwise(obj, name)
    return typed


_GVK = declared(group=STRING, version=STRING, kind=STRING)
_GVR = declared(group=STRING, version=STRING, resource=STRING)
#: `request`: a field it lacks (`request.userinfo`) is a compilation error when a policy or a
#: webhook's matchCondition is written
REQUEST = declared(
    kind=_GVK, resource=_GVR, subResource=STRING, requestKind=_GVK, requestResource=_GVR, requestSubResource=STRING,
    name=STRING, namespace=STRING, operation=STRING, dryRun=BOOL, options=DYN,
    userInfo=declared(username=STRING, uid=STRING, groups=list_of(STRING), extra=map_of(STRING, list_of(STRING))))
#: `namespaceObject` (its metadata's uid is `UID` there); its timestamps are left dyn, as the
#: namespace is bound as the JSON it is stored as
NAMESPACE = declared(
    metadata=declared(name=STRING, generateName=STRING, namespace=STRING, labels=map_of(STRING, STRING),
                      annotations=map_of(STRING, STRING), UID=STRING, creationTimestamp=DYN,
                      deletionGracePeriodSeconds=INT, deletionTimestamp=DYN, generation=INT, resourceVersion=STRING,
                      finalizers=list_of(STRING)),
    spec=declared(finalizers=list_of(STRING)),
    status=declared(conditions=list_of(declared(status=STRING, type=STRING, lastTransitionTime=DYN, message=STRING,
                                                reason=STRING)), phase=STRING))
#: the variables with a declared type; the others (object, oldObject, params) are typed by their use
TYPED = {"authorizer": AUTHORIZER, "request": REQUEST, "namespaceObject": NAMESPACE}
