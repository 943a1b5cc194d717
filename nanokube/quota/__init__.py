"""Resource quota accounting shared by quota admission (API server) and the
resource-quota controller (upstream's pkg/quota/v1): which names a quota may
hold, what each object charges, and which quotas cover it."""
