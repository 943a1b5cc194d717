"""A CRD's versions as upstream's field errors print them: the internal apiextensions types (no JSON
tags, so json.Marshal writes every field under its Go name, unset pointers and slices as null)
that ValidateCustomResourceDefinition holds after converting from v1."""

from __future__ import annotations

from typing import Any

from ...machinery.gofmt import Struct


def version(v: dict[str, Any], folded: frozenset[str] = frozenset()) -> Struct:
    """apiextensions.CustomResourceDefinitionVersion; the `folded` fields conversion moved to the spec are nil."""
    schema = None if "schema" in folded else v.get("schema")
    subs = None if "subresources" in folded else v.get("subresources")
    columns = None if "additionalPrinterColumns" in folded else v.get("additionalPrinterColumns")
    fields = None if "selectableFields" in folded else v.get("selectableFields")
    return Struct(
        Name=v.get("name") or "", Served=bool(v.get("served")), Storage=bool(v.get("storage")),
        Deprecated=bool(v.get("deprecated")), DeprecationWarning=v.get("deprecationWarning"),
        Schema=None if schema is None else Struct(OpenAPIV3Schema=props(schema.get("openAPIV3Schema"))),
        Subresources=None if subs is None else _subresources(subs),
        AdditionalPrinterColumns=None if columns is None else [Struct(
            Name=c.get("name") or "", Type=c.get("type") or "", Format=c.get("format") or "",
            Description=c.get("description") or "", Priority=c.get("priority") or 0,
            JSONPath=c.get("jsonPath") or "") for c in columns],
        SelectableFields=None if fields is None else [Struct(JSONPath=f.get("jsonPath") or "") for f in fields])


def _subresources(subs: dict[str, Any]) -> Struct:
    scale = subs.get("scale")
    return Struct(Status=None if subs.get("status") is None else Struct(),
                  Scale=None if scale is None else Struct(
                      SpecReplicasPath=scale.get("specReplicasPath") or "",
                      StatusReplicasPath=scale.get("statusReplicasPath") or "",
                      LabelSelectorPath=scale.get("labelSelectorPath")))


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _list(items: Any) -> list[Struct] | None:
    return None if items is None else [props(s) for s in items]


def _map(m: Any) -> dict[str, Struct] | None:
    return None if m is None else {k: props(s) for k, s in m.items()}


def _or_bool(v: Any) -> Struct | None:
    """JSONSchemaPropsOrBool: a bool is Allows alone; a schema allows."""
    if v is None:
        return None
    if isinstance(v, bool):
        return Struct(Allows=v, Schema=None)
    return Struct(Allows=True, Schema=props(v))


def or_array(v: Any) -> Struct | None:
    """JSONSchemaPropsOrArray: a list of schemas, or one."""
    if v is None:
        return None
    if isinstance(v, list):
        return Struct(Schema=None, JSONSchemas=_list(v))
    return Struct(Schema=props(v), JSONSchemas=None)


def _dependencies(deps: Any) -> dict[str, Struct] | None:
    if deps is None:
        return None
    return {k: Struct(Schema=None, Property=d) if isinstance(d, list) else Struct(Schema=props(d), Property=None)
            for k, d in deps.items()}


def props(s: Any) -> Struct | None:
    """apiextensions.JSONSchemaProps, field by field in its declaration order."""
    if s is None:
        return None
    docs = s.get("externalDocs")
    rules = s.get("x-kubernetes-validations")
    return Struct(
        ID=s.get("id") or "", Schema=s.get("$schema") or "", Ref=s.get("$ref"),
        Description=s.get("description") or "", Type=s.get("type") or "", Nullable=bool(s.get("nullable")),
        Format=s.get("format") or "", Title=s.get("title") or "", Default=s.get("default"),
        Maximum=_float(s.get("maximum")), ExclusiveMaximum=bool(s.get("exclusiveMaximum")),
        Minimum=_float(s.get("minimum")), ExclusiveMinimum=bool(s.get("exclusiveMinimum")),
        MaxLength=s.get("maxLength"), MinLength=s.get("minLength"), Pattern=s.get("pattern") or "",
        MaxItems=s.get("maxItems"), MinItems=s.get("minItems"), UniqueItems=bool(s.get("uniqueItems")),
        MultipleOf=_float(s.get("multipleOf")), Enum=s.get("enum"),
        MaxProperties=s.get("maxProperties"), MinProperties=s.get("minProperties"), Required=s.get("required"),
        Items=or_array(s.get("items")), AllOf=_list(s.get("allOf")), OneOf=_list(s.get("oneOf")),
        AnyOf=_list(s.get("anyOf")), Not=props(s.get("not")), Properties=_map(s.get("properties")),
        AdditionalProperties=_or_bool(s.get("additionalProperties")),
        PatternProperties=_map(s.get("patternProperties")), Dependencies=_dependencies(s.get("dependencies")),
        AdditionalItems=_or_bool(s.get("additionalItems")), Definitions=_map(s.get("definitions")),
        ExternalDocs=None if docs is None else Struct(Description=docs.get("description") or "",
                                                      URL=docs.get("url") or ""),
        Example=s.get("example"), XPreserveUnknownFields=s.get("x-kubernetes-preserve-unknown-fields"),
        XEmbeddedResource=bool(s.get("x-kubernetes-embedded-resource")),
        XIntOrString=bool(s.get("x-kubernetes-int-or-string")), XListMapKeys=s.get("x-kubernetes-list-map-keys"),
        XListType=s.get("x-kubernetes-list-type"), XMapType=s.get("x-kubernetes-map-type"),
        XValidations=None if rules is None else [Struct(
            Rule=r.get("rule") or "", Message=r.get("message") or "", MessageExpression=r.get("messageExpression") or "",
            Reason=r.get("reason"), FieldPath=r.get("fieldPath") or "", OptionalOldSelf=r.get("optionalOldSelf"))
            for r in rules])
