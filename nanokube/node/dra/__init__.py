"""The simulated DRA drivers of a node (gpu.nanokube.io, nic.nanokube.io):
ResourceSlice publication, DeviceClasses, claim preparation and device health;
and the kubelet's side of external drivers' plugins, over gRPC.

gRPC's core logs to stderr at INFO until absl's logging is set up, which a Python process never
does: each connection a restarting plugin closes printed "Got goaway ... Cancelling all calls",
though the node just connects again (the kubelet's gRPC logs that only at a high verbosity).
Unless the user chose a verbosity, only its errors are printed; this runs before any module here
imports grpc, whose core reads the variable once, when loaded."""

import os

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
