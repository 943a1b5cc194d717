"""`nanokube simulate`: the real control plane replaying workload traces on a virtual clock."""
