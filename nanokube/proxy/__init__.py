"""kube-proxy: watches Services and EndpointSlices and programs the node's
nftables `kube-proxy` table."""
