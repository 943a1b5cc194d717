"""apiextensions.k8s.io: serving CustomResourceDefinitions and their custom resources.

The CRD's schema checks (`structural_schema`, `crd_validation`), the custom objects'
pruning, defaulting and validation (`defaulting`, `validator`, `jsonpath` for printer
columns and selectable fields), the served `Resource` a CRD becomes (`resource`), the
serving itself (`serving`) and the controllers upstream's apiextensions-apiserver runs
in-process (`naming`, `establishing`, `finalizer`). CEL rules (`cel_rules`) and webhook
conversion (`conversion`) plug into them.
"""
