"""Encryption at rest, as kube-apiserver's --encryption-provider-config: an EncryptionConfiguration
(config.py) names, per resource, the providers that write and read its stored values (value.py's
transformers, kmsv2.py's envelope), and store.py applies them between the registry and the store."""
