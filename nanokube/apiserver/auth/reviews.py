"""Review resources: create-only objects the API server answers and never
stores. Authorization reviews ask the authorizer chain about a subject
(SubjectAccessReview, LocalSubjectAccessReview), about the requester
(SelfSubjectAccessReview) or list the requester's rules in a namespace
(SelfSubjectRulesReview, `kubectl auth can-i --list`); TokenReview asks the
token authenticator who a bearer token is (webhook token authentication for
extension servers and kubelets).
"""

from __future__ import annotations

from typing import Any, Callable

from ...clock import REAL, Clock
from ...machinery import errors
from ...machinery.meta import without_zero_creation
from ...machinery.user import User
from .authorizer import Decision, access_review, review_attributes, review_status

def _answer(body: dict, kind: str, status: dict) -> dict:
    """The review answered; a zero creationTimestamp is left out (omitzero since 1.34), not null."""
    return {"kind": kind, "apiVersion": body.get("apiVersion") or _API_VERSION[kind],
            "metadata": without_zero_creation(body.get("metadata")),
            "spec": body.get("spec") or {}, "status": status}


_API_VERSION = {
    "SubjectAccessReview": "authorization.k8s.io/v1", "LocalSubjectAccessReview": "authorization.k8s.io/v1",
    "SelfSubjectAccessReview": "authorization.k8s.io/v1", "SelfSubjectRulesReview": "authorization.k8s.io/v1",
    "TokenReview": "authentication.k8s.io/v1",
}


def rules_review_status(resource_rules: list[dict], non_resource_rules: list[dict]) -> dict:
    """SubjectRulesReviewStatus from RBAC PolicyRules (upstream's RulesFor split)."""
    res = []
    for r in resource_rules:
        rule = {"verbs": r.get("verbs") or []}
        rule.update({k: r[k] for k in ("apiGroups", "resources", "resourceNames") if r.get(k)})
        res.append(rule)
    non = [{"verbs": r.get("verbs") or [], "nonResourceURLs": r.get("nonResourceURLs") or []} for r in non_resource_rules]
    return {"resourceRules": res, "nonResourceRules": non, "incomplete": False}


class Reviews:
    """Answers POSTs to review resources: `await reviews(res, body, user, namespace)`.

    `await authorize(user, attributes) -> Decision` is the authorizer chain,
    `rules_for(name, groups, namespace) -> (resource rules, non-resource rules)`
    the RBAC rules, `authenticate(token, audiences) -> (User | None, audiences, error)`
    the token authenticator. More kinds register in `answers` by Kind.
    """

    def __init__(self, authorize: Callable, rules_for: Callable, authenticate: Callable | None,
                 clock: Clock = REAL) -> None:
        self.authorize = authorize
        self.clock = clock
        self.rules_for = rules_for
        #: `unlisted(name, groups, RBAC's errors) -> (incomplete, every rule resolver's errors in the
        #: chain's order)`: what the authorizers whose rules rules_for cannot list add for a user
        self.unlisted: Callable | None = None
        self.authenticate = authenticate
        self.answers: dict[str, Callable] = {
            "SelfSubjectAccessReview": self._self_access,
            "SubjectAccessReview": self._subject_access,
            "LocalSubjectAccessReview": self._local_subject_access,
            "SelfSubjectRulesReview": self._self_rules,
            "TokenReview": self._token,
            "SelfSubjectReview": self._self_subject,
        }

    async def __call__(self, res, body: Any, user: User, namespace: str | None = None) -> dict:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of a review must be an object")
        answer = self.answers.get(res.kind)
        if answer is None:
            raise errors.method_not_allowed()
        errs = res.strategy.validate(body)
        if errs:
            raise errors.invalid(res.group, res.kind, (body.get("metadata") or {}).get("name", ""), errs)
        return await answer(body, user, namespace)

    async def _self_access(self, body: dict, user: User, namespace: str | None) -> dict:
        return access_review(await self.authorize(user, review_attributes(body)), body)

    async def _decide_for_subject(self, spec: dict) -> Decision:
        subject = User(spec.get("user", ""), tuple(spec.get("groups") or ()), spec.get("uid", ""), spec.get("extra") or {})
        return await self.authorize(subject, review_attributes({"spec": spec}))

    async def _subject_access(self, body: dict, user: User, namespace: str | None) -> dict:
        return _answer(body, "SubjectAccessReview", review_status(await self._decide_for_subject(body["spec"])))

    async def _local_subject_access(self, body: dict, user: User, namespace: str | None) -> dict:
        ra = body["spec"].get("resourceAttributes") or {}
        if ra.get("namespace", "") != (namespace or ""):
            raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        md = body.get("metadata") or {}
        if md.get("namespace") and md["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        body = {**body, "metadata": {**md, "namespace": namespace}}
        return _answer(body, "LocalSubjectAccessReview", review_status(await self._decide_for_subject(body["spec"])))

    async def _self_rules(self, body: dict, user: User, namespace: str | None) -> dict:
        """Upstream answers with a new object, echoing nothing of the request, and needs a namespace."""
        ns = (body.get("spec") or {}).get("namespace") or ""
        if not ns:
            raise errors.bad_request("no namespace on request")
        unresolved: list[str] = []
        resource_rules, non_resource_rules = self.rules_for(user.name, user.groups, ns, unresolved)
        status = rules_review_status(resource_rules, non_resource_rules)
        # RBAC's authorizer reads roles through informers' listers, whose NotFound names the resource
        # in the singular
        rbac = [e.replace("roles.rbac.", "role.rbac.", 1) for e in unresolved]
        incomplete, failures = self.unlisted(user.name, user.groups, rbac) if self.unlisted is not None else (False, rbac)
        if incomplete:
            status["incomplete"] = True
        # upstream's union of rule resolvers: their errors aggregated (flattened, each once, one without brackets)
        failures = list(dict.fromkeys(failures))
        if failures:
            status["evaluationError"] = failures[0] if len(failures) == 1 else f"[{', '.join(failures)}]"
        return _answer({"apiVersion": body.get("apiVersion")}, "SelfSubjectRulesReview", status)

    async def _self_subject(self, body: dict, user: User, namespace: str | None) -> dict:
        """Who the requester is (`kubectl auth whoami`); stamped now, as upstream does."""
        info: dict[str, Any] = {"username": user.name}
        if user.uid:
            info["uid"] = user.uid
        info["groups"] = list(user.groups)
        if user.extra:
            info["extra"] = user.extra
        return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": self.clock.rfc3339()}, "status": {"userInfo": info}}

    async def _token(self, body: dict, user: User, namespace: str | None) -> dict:
        spec = body.get("spec") or {}
        if not spec.get("token"):
            raise errors.bad_request("token is required for TokenReview in authentication")
        found, audiences, error = (None, [], "") if self.authenticate is None else \
            await self.authenticate(spec["token"], spec.get("audiences") or None)
        if found is None:  # authenticated false (omitted), and the authenticator's error when it gave one
            return _answer(body, "TokenReview", {"user": {}, **({"error": error} if error else {})})
        info: dict[str, Any] = {"username": found.name, "uid": found.uid, "groups": list(found.groups)}
        if found.extra:
            info["extra"] = found.extra
        return _answer(body, "TokenReview", {"authenticated": True, "user": info, "audiences": audiences})
