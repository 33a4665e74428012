"""The typed facts the checks read, and their readers: each record is frozen and has a `from_env` (a
host's facts dict) and, where an image can say it, a `from_image` (an image's facts dict). The readers
are the only code that knows the JSON shapes of the report's `facts` section.

fields: the typed field readers; software: interpreter, torch, NCCL, torchrun; gpu_devices: NVML's
devices, processes and P2P pairs; host: /dev/shm, user, limits, container, network, environment
variables; image_only: what only an image says (its digests and config, interpreters on disk, CUDA
libraries, what its run command needs).
"""
