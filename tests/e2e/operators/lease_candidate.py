"""One replica of an operator electing its leader through a coordination.k8s.io Lease with the
official client's leaderelection package; prints `IDENTITY leading` once it leads."""

import sys

from kubernetes import config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

config.load_kube_config()
identity = sys.argv[1]
lock = LeaseLock("trainer-operator", "default", identity)
leaderelection.LeaderElection(electionconfig.Config(
    lock, lease_duration=4, renew_deadline=3, retry_period=1,
    onstarted_leading=lambda: print(identity, "leading", flush=True),
    onstopped_leading=lambda: print(identity, "stopped", flush=True))).run()
