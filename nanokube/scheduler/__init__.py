"""kube-scheduler: a scheduling queue, a framework of extension points and
the plugins that fill them."""
