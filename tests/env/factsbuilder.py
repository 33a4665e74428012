"""Facts dicts in the shape env.facts.gather() produces, for judging GPU cases on a CPU machine.

The base is a healthy single-node GPU box; each test overrides only what it is about.
"""

from __future__ import annotations

import copy
from typing import Any

H200 = {
    "index": 0,
    "name": "NVIDIA H200",
    "uuid": "GPU-0d1f7c2a-1111-2222-3333-444455556666",
    "memory_bytes": 150_754_820_096,
    "compute_capability": "9.0",
    "mig_mode": "disabled",
    "pci_bus_id": "00000000:19:00.0",
    "nvlinks_active": 18,
}

BASE: dict[str, Any] = {
    "python": {
        "version": "3.12.3",
        "implementation": "CPython",
        "executable": "/opt/venv/bin/python",
        "prefix": "/opt/venv",
        "base_prefix": "/usr",
        "venv": True,
        "conda_env": None,
    },
    "torch": {
        "installed": True,
        "version": "2.7.0+cu126",
        "metadata_version": "2.7.0+cu126",
        "location": "/opt/venv/lib/python3.12/site-packages/torch",
        "importable": True,
        "import_error": None,
        "cuda": "12.6",
        "hip": None,
        "cudnn": 90501,
        "flavour": "cuda",
        "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        "distributed": True,
        "backends": {"nccl": True, "gloo": True, "mpi": False},
        "nccl_version": "2.26.2",
        "run_module": True,
        "source": "import",
        "import_s": 2.1,
    },
    "nccl": {
        "library": "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "source": "loaded by torch from the nvidia-nccl-cu12==2.26.2 package",
        "loadable": True,
        "version": "2.26.2",
        "error": None,
        "candidates": [],
    },
    "gpus": {
        "driver_loaded": True,
        "driver_version": "570.124.06",
        "cuda_driver_version": "12.8",
        "count": 1,
        "physical_count": 1,
        "visible": [H200],
        "all": [H200],
        "cuda_visible_devices": None,
        "error": None,
        "device_nodes": ["/dev/nvidia0", "/dev/nvidiactl"],
        "topology": [],
    },
    "topology": {"pairs": []},
    "torchrun": {
        "path": "/opt/venv/bin/torchrun",
        "shebang_python": "/opt/venv/bin/python",
        "same_env": True,
        "env_script": "/opt/venv/bin/torchrun",
    },
    "shm": {"path": "/dev/shm", "size_bytes": 64 << 30, "free_bytes": 64 << 30, "error": None},
    "ulimits": {"memlock_soft_bytes": None, "memlock_hard_bytes": None, "nofile_soft": 1048576, "nofile_hard": 1048576},
    "container": {"in_container": False, "kind": None, "kubernetes": False, "evidence": []},
    "user": {"uid": 1000, "gid": 1000, "name": "trainer", "root": False},
    "env": {},
    "network": {
        "interfaces": [
            {"name": "lo", "state": "unknown", "loopback": True, "addresses": ["127.0.0.1"]},
            {"name": "eth0", "state": "up", "loopback": False, "addresses": ["10.0.0.5"]},
        ],
        "infiniband": {"devices": [], "libibverbs": None},
    },
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and not v.get("__replace__"):
            _merge(base[k], v)
        else:
            base[k] = {kk: vv for kk, vv in v.items() if kk != "__replace__"} if isinstance(v, dict) else v
    return base


def make_facts(**sections: Any) -> dict[str, Any]:
    return _merge(copy.deepcopy(BASE), sections)
