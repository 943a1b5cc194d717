"""The built-in storage driver: a dynamic provisioner of local directories
under the data dir and the default StorageClass that names it."""

from .provisioner import CSI_DRIVER, PROVISIONER, PROVISIONER_USER, LocalPathProvisioner, ensure_default_class

__all__ = ["CSI_DRIVER", "PROVISIONER", "PROVISIONER_USER", "LocalPathProvisioner", "ensure_default_class"]
