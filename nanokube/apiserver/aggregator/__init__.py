"""The aggregation layer (kube-aggregator inside kube-apiserver): APIService
objects name every served group/version; local ones are this server's own
(auto-registered at startup), those with a `service` are proxied to an
extension API server with the front-proxy identity headers, checked for
availability, and merged into discovery."""
