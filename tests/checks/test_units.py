"""The shared check units on typed facts: thresholds and wording from the one knowledge table."""

from __future__ import annotations

import subprocess
import sys

from ddp_doctor import knowledge
from ddp_doctor.checks import table
from ddp_doctor.checks.docs import render
from ddp_doctor.checks.facts.host import ShmFacts, UserFacts
from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.registry import ALL
from ddp_doctor.checks.units import shm, torch_import, user
from ddp_doctor.report import Status
from tests.env.factsbuilder import make_facts

MiB, GiB = 1 << 20, 1 << 30


def test_shm_thresholds_come_from_the_table() -> None:
    rule = table.shm()
    assert rule.fail_below_bytes == 256 * MiB and rule.warn_below_bytes == 1 * GiB
    verdicts = {
        size: shm.CHECK.run(ShmFacts(size, size), "env").status for size in (64 * MiB, 512 * MiB, 2 * GiB, None)
    }
    assert verdicts == {64 * MiB: Status.FAIL, 512 * MiB: Status.WARN, 2 * GiB: Status.PASS, None: Status.FAIL}
    # free space below the fail threshold fails a big /dev/shm too
    assert shm.CHECK.run(ShmFacts(8 * GiB, 100 * MiB), "env").status is Status.FAIL


def test_shm_remedy_sizes_per_gpu_and_for_a_full_node_when_unknown() -> None:
    two = shm.CHECK.run(ShmFacts(64 * MiB, 64 * MiB, gpus=2), "env")
    assert "--shm-size=8g" in (two.remedy or "") and "sizeLimit: 8Gi" in (two.remedy or "")
    unknown = shm.CHECK.run(ShmFacts(64 * MiB, 64 * MiB), "env")
    assert "--shm-size=32g" in (unknown.remedy or "") and "4 GiB per GPU" in (unknown.remedy or "")


def test_launch_default_is_the_shared_rule() -> None:
    from ddp_doctor.deploy.spec import SHM_PER_GPU

    assert SHM_PER_GPU == table.shm().per_gpu_bytes


def test_user_same_words_for_a_process_and_an_image() -> None:
    host = user.CHECK.run(UserFacts.from_env({"user": {"uid": 0, "name": "root", "root": True}}), "env")
    image = user.CHECK.run(UserFacts.from_image({"image": {"config": {"User": ""}}}), "image")
    assert (host.id, image.id) == ("env.user", "image.user")
    assert host.status is image.status is Status.WARN
    assert host.cause == image.cause == table.non_root().why
    assert host.remedy == image.remedy == table.non_root().remedy()
    assert host.summary == "this process runs as root (uid 0); expected a non-root user"
    assert image.summary == "the image runs as root (User='' in the image config); expected a non-root user"
    rootfs = user.CHECK.run(UserFacts.from_image({"image": {"config": None}}), "image")
    assert rootfs.status is Status.SKIP
    fine = user.CHECK.run(UserFacts.from_image({"image": {"config": {"User": "1000:1000"}}}), "image")
    assert fine.status is Status.PASS


def test_a_judge_that_breaks_is_an_error_not_a_pass() -> None:
    broken = shm.CHECK.run(ShmFacts("big", 1), "env")  # type: ignore[arg-type]
    assert broken.status is Status.ERROR and broken.id == "env.shm"


def test_every_check_is_documented_and_the_page_is_current() -> None:
    from ddp_doctor.checks.docs import PAGE

    for c in ALL:
        assert c.doc, f"{c.name}: the judge's docstring is its documentation"
        assert f'<a id="{c.name}"></a>' in render()
    assert PAGE.read_text(encoding="utf-8") == render(), "run: python -m ddp_doctor.checks.docs"


def test_docs_check_mode_detects_a_stale_page(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "checks.md"
    stale.write_text("old\n")
    cmd = [sys.executable, "-m", "ddp_doctor.checks.docs", "--check", "--output", str(stale)]
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 1
    stale.write_text(render())
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 0


def test_a_wrong_typed_fact_is_an_error_never_a_pass() -> None:
    """A facts file from another version or edited by hand: the adapter refuses the field, and the
    host's evaluate() reports each check that reads it as an error (before: `importable: 1` passed)."""
    from ddp_doctor.env import checks
    from tests.env.factsbuilder import make_facts

    good = {r.id: r for r in checks.evaluate(make_facts())}
    assert good["env.torch.import"].status is Status.PASS and good["env.distributed"].status is Status.PASS
    bad = {r.id: r for r in checks.evaluate(make_facts(torch={"importable": 1, "import_s": [2.1]}))}
    for rid in ("env.torch.import", "env.numpy", "env.distributed"):
        assert bad[rid].status is Status.ERROR, (rid, bad[rid].summary)
        assert "torch.importable is int" in bad[rid].summary
    assert bad["env.python"].status is Status.PASS  # a check that does not read the field is unaffected


def test_one_gpu_runtime_remedy_for_a_container_started_without_gpus() -> None:
    """env.gpus, env.container and env.gpus.expected said this in two different texts; now all three
    give checks/knowledge.yaml's `gpu_runtime` remedy (docker, podman CDI and Kubernetes)."""
    from ddp_doctor.env import checks
    from tests.env.factsbuilder import make_facts

    no_runtime = make_facts(
        gpus={"driver_loaded": False, "error": "NVML Shared Library Not Found", "physical_count": 0, "visible": []},
        container={"in_container": True, "kind": "docker", "evidence": ["/.dockerenv"]},
    )
    results = {r.id: r for r in checks.evaluate(no_runtime)}
    remedy = table.gpu_runtime().remedy
    for rid in ("env.gpus", "env.container", "env.gpus.expected"):
        assert results[rid].status is Status.FAIL, (rid, results[rid].summary)
        assert remedy in (results[rid].remedy or ""), rid
    assert "--gpus all" in remedy and "nvidia.com/gpu=all" in remedy and "nvidia.com/gpu: N" in remedy


def test_busy_thresholds_come_from_the_table() -> None:
    from ddp_doctor.checks.facts.gpu_devices import BusyFacts
    from ddp_doctor.checks.units import gpus_busy

    rule = table.gpu_busy()
    gpu = {"index": 0, "name": "H200", "util_pct": 0.0, "processes": []}

    def verdict(used: int, util: float) -> Status:
        facts = {"gpus": {"driver_loaded": True, "visible": [{**gpu, "memory_used_bytes": used, "util_pct": util}]}}
        return gpus_busy.CHECK.run(BusyFacts.from_env(facts), "env").status

    assert verdict(rule.memory_bytes - 1, 0.0) is Status.PASS
    assert verdict(rule.memory_bytes, 0.0) is Status.WARN
    assert verdict(0, rule.util_pct) is Status.WARN


def test_env_vars_same_rules_on_a_host_and_in_an_image() -> None:
    """image.env used to apply only the warn rules to NCCL_*/TORCH_* names, so an image baking
    CUDA_LAUNCH_BLOCKING=1 or RANK=0 passed there and warned under `check`; both run the env_vars unit now."""
    from ddp_doctor.checks.facts.host import EnvVarsFacts
    from ddp_doctor.checks.units import env_vars

    baked = {"CUDA_LAUNCH_BLOCKING": "1", "RANK": "0", "WORLD_SIZE": "2", "PATH": "/usr/bin"}
    host = env_vars.CHECK.run(EnvVarsFacts.from_env({"env": {k: v for k, v in baked.items() if k != "PATH"}}), "env")
    image = env_vars.CHECK.run(EnvVarsFacts.from_image({"image": {"config": {}, "env": baked}}), "image")
    assert (host.id, image.id) == ("env.env_vars", "image.env")
    assert host.status is image.status is Status.WARN
    assert image.summary == "the image sets " + host.summary
    assert "CUDA_LAUNCH_BLOCKING=1: every CUDA kernel launch is synchronous" in host.summary
    assert "set outside torchrun: RANK=0, WORLD_SIZE=2" in host.summary
    assert image.observed["env"] == {"CUDA_LAUNCH_BLOCKING": "1", "RANK": "0", "WORLD_SIZE": "2"}  # PATH is not read
    assert (image.remedy or "").startswith("remove them from the Dockerfile ENV")
    # an image's interfaces are the node's: a *_SOCKET_IFNAME is not matched there, only on a host
    ifname = {"NCCL_SOCKET_IFNAME": "eth9"}
    assert env_vars.CHECK.run(EnvVarsFacts.from_image({"image": {"config": {}, "env": ifname}}), "image").status is (
        Status.PASS
    )
    assert env_vars.CHECK.run(EnvVarsFacts.from_env({"env": ifname}), "env").status is Status.FAIL
    rootfs = env_vars.CHECK.run(EnvVarsFacts.from_image({"image": {"config": None}}), "image")
    assert (rootfs.status, rootfs.summary) == (Status.SKIP, "a rootfs has no config Env")


def test_every_host_adapter_refuses_a_wrong_typed_field() -> None:
    """One wrong-typed field per section: the checks reading that section are errors, the rest keep their verdict."""
    from ddp_doctor.env import checks
    from tests.env.factsbuilder import make_facts

    good = {r.id: r.status for r in checks.evaluate(make_facts())}
    cases = {
        "env.shm": {"shm": {"size_bytes": "64g"}},
        "env.user": {"user": {"uid": "0", "root": None}},
        "env.nccl": {"nccl": {"loadable": "yes"}},
        "env.torchrun": {"torchrun": {"same_env": 1}},
        "env.ulimits": {"ulimits": {"nofile_soft": "1024"}},
        "env.container": {"container": {"evidence": "/.dockerenv"}},
        "env.network": {"network": {"interfaces": [{"state": "up", "addresses": ["10.0.0.5"]}]}},
        "env.gpu_topology": {"topology": {"pairs": [{"a": 0, "p2p_read": "ok"}]}},
    }
    for rid, broken in cases.items():
        results = {r.id: r for r in checks.evaluate(make_facts(**broken))}
        assert results[rid].status is Status.ERROR, (rid, results[rid].summary)
        assert "facts field" in results[rid].summary
        assert results["env.python"].status is good["env.python"]


def test_one_reading_of_socket_ifname_for_check_and_multinode_preflight() -> None:
    """GLOO_SOCKET_IFNAME is a list of exact names (torch opens each with createDeviceForInterface);
    env.env_vars read it with NCCL's prefix rules and passed 'eth' on a host with eth0, while the
    multi-node preflight already said it selects nothing. Both read checks.interfaces now."""
    from ddp_doctor.env import checks
    from ddp_doctor.live.multinode.preflight import match_ifname
    from tests.env.factsbuilder import make_facts

    names = ["lo", "eth0"]

    def env_vars(**env: str) -> Status:
        return {r.id: r for r in checks.evaluate(make_facts(env=env))}["env.env_vars"].status

    assert match_ifname("eth", names, "GLOO_SOCKET_IFNAME") == [] and env_vars(GLOO_SOCKET_IFNAME="eth") is Status.FAIL
    assert match_ifname("eth", names, "NCCL_SOCKET_IFNAME") == ["eth0"] and env_vars(NCCL_SOCKET_IFNAME="eth") is (
        Status.PASS
    )
    assert env_vars(GLOO_SOCKET_IFNAME="eth0") is Status.PASS
    partly = {r.id: r for r in checks.evaluate(make_facts(env={"GLOO_SOCKET_IFNAME": "eth0,eth9"}))}["env.env_vars"]
    assert partly.status is Status.FAIL and "names eth9, which does not exist here" in partly.summary
    assert env_vars(NCCL_SOCKET_IFNAME="^lo,eth") is Status.FAIL  # excludes every interface there is


def test_an_import_error_gets_the_cause_and_remedy_of_its_first_matching_rule() -> None:
    error = "ImportError: /x/libtorch_cuda.so: undefined symbol: ncclCommRegister"
    facts = TorchFacts.from_env(make_facts(torch={"importable": False, "import_error": error}))
    cause, remedy = torch_import.advice(error, facts)
    rule = next(r for r in knowledge.import_errors() if "undefined symbol" in r.match)
    assert cause == rule.cause and "LD_LIBRARY_PATH" in remedy and "{install}" not in remedy
    assert (
        torch_import.advice("SomethingElse: no rule for it", facts)[0] == "torch is installed but raises during import"
    )
