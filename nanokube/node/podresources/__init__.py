"""The kubelet's pod resources API (KEP-606 podresources v1; KEP-3695's dynamic resources) on each
simulated node: a unix socket monitoring agents (dcgm-exporter) and DRA drivers ask which devices
the node's pods hold (server.py), rate limited as upstream's (ratelimit.py)."""
