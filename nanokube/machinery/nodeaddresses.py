"""A Node's status.addresses types (core/v1 NodeAddressType), in the order kube-apiserver reaches a
kubelet by default (--kubelet-preferred-address-types): shared by the flag and the dialler."""

PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
