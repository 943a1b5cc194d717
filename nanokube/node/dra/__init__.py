"""The simulated DRA drivers of a node (gpu.nanokube.io, nic.nanokube.io):
ResourceSlice publication, DeviceClasses, claim preparation and device health."""
