"""What the API server, the PV controller, the scheduler's VolumeBinding plugin
and the node agents share about persistent volumes (upstream's
`pkg/volume/util` and `pkg/controller/volume/persistentvolume/util`): the
annotations, how a claim names its class, and which volume fits a claim."""
