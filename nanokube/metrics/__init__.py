"""Metrics APIs (resource, custom, external) served from a built-in provider."""
