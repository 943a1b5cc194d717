"""Protobuf messages of the kubelet's pod resources API (generated from podresources.proto here)."""
