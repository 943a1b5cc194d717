"""Calling out from the API server: the HTTPS client and clientConfig rules
shared by admission webhooks and CRD conversion webhooks."""
