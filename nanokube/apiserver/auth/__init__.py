"""Who may do what: request attributes, the RBAC authorizer and its default
policy. Authentication (client certificates, tokens) stays in the server's
middleware; this package only decides on an authenticated user."""

from .authorizer import Attributes, Decision, attributes_for, forbidden
from .rbac import RBACAuthorizer, bootstrap_policy, namespace_policy

__all__ = ["Attributes", "Decision", "RBACAuthorizer", "attributes_for", "bootstrap_policy", "forbidden", "namespace_policy"]
