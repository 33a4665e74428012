"""`ddp-doctor check` across nodes: preflight before torchrun's c10d rendezvous, the cluster report after."""
