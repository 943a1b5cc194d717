"""kube-apiserver's audit backend modes (options.AllowedModes), shared by the flags' validation
(audit_options, which `nanokube up` runs before it imports the server) and the webhook backend."""

#: in upstream's order (that of its "allowed modes are" message)
MODES = ("batch", "blocking", "blocking-strict")
