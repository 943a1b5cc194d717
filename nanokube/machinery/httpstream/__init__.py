"""The stream transports and servers both sides use (upstream's
k8s.io/apimachinery/pkg/util/httpstream and the kubelet's cri/streaming servers): the node
agent's /exec, /attach and /portForward serve them, and the API server's upgraded proxies
speak them, so they live below both."""
