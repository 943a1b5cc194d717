"""Protobuf messages of the kubelet plugin APIs a DRA driver serves (generated from the .proto files here)."""
