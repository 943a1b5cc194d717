"""The API vocabulary the API server and every component share, like k8s.io/apimachinery.

Errors (`Status`), label and field selectors, quantities, name and field validation.
It imports nothing else of nanokube, so any layer may import it.
"""
