"""Protobuf messages of the device plugin API v1beta1 (generated from deviceplugin.proto here)."""
