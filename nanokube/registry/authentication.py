"""authentication.k8s.io/v1 reviews: created, answered and never stored
(ServiceAccount TokenRequests are a subresource, see core.py)."""

from __future__ import annotations

from .base import Resource, Strategy, register


class TokenReviewStrategy(Strategy):
    """TokenReview: the token is checked by the API server's authenticator
    (apiserver/auth/reviews.py); an empty token is a 400, not a field error."""

    track_generation = False


class SelfSubjectReviewStrategy(Strategy):
    """SelfSubjectReview (`kubectl auth whoami`): the answer is the requester's
    user info; the body carries nothing to validate."""

    track_generation = False


register(
    Resource("authentication.k8s.io", "tokenreviews", "TokenReview", ["v1"], namespaced=False,
             strategy=TokenReviewStrategy(), verbs=("create",)),
    Resource("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", ["v1"], namespaced=False,
             strategy=SelfSubjectReviewStrategy(), verbs=("create",)),
)
