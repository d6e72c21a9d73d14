"""pysched_dev.realcluster's pure parts: the address plan, the CNI, kubelet and containerd
configuration, image archive names, host-state diffs, daemons by PID (no root needed)."""

from __future__ import annotations

import io
import ipaddress
import json
import random
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from pysched_dev.realcluster import __main__ as cli
from pysched_dev.realcluster import containerd, kubelet, network
from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.hoststate import HostState
from pysched_dev.realcluster.procs import Daemon, kill_pids, pids_referencing


def test_subnets_avoid_every_taken_network():
    free = ipaddress.IPv4Network("10.123.44.0/22")
    taken = list(ipaddress.IPv4Network("10.0.0.0/8").address_exclude(free))
    s = network.pick_subnets(taken, random.Random(1))
    assert s.block == free
    assert (str(s.pods), str(s.services), str(s.kwok)) == ("10.123.44.0/24", "10.123.45.0/24", "10.123.46.0/23")
    assert (s.gateway, s.api_address) == ("10.123.44.1", "10.123.45.1")


def test_subnets_fail_when_none_is_free():
    with pytest.raises(RealClusterError, match="no free /22"):
        network.pick_subnets([ipaddress.IPv4Network("10.0.0.0/8")], random.Random(1))


def test_cni_is_a_bridge_without_gateway_masquerade_or_portmap(tmp_path):
    s = network.Subnets.of(ipaddress.IPv4Network("10.200.0.0/22"))
    conf = json.loads(network.cni_conflist(tmp_path / "c.conflist", network="n", bridge="psched-x", subnets=s,
                                           ipam_dir=tmp_path / "ipam").read_text())
    assert [p["type"] for p in conf["plugins"]] == ["bridge"]   # portmap would leave nat chains behind
    bridge = conf["plugins"][0]
    assert (bridge["isGateway"], bridge["ipMasq"], bridge["bridge"]) == (False, False, "psched-x")
    assert bridge["ipam"]["routes"] == [{"dst": "10.200.1.0/24", "gw": "10.200.0.1"}]
    assert bridge["ipam"]["dataDir"] == str(tmp_path / "ipam")


def test_kubelet_configuration_changes_nothing_host_wide(tmp_path):
    path = kubelet.config(tmp_path / "k.yaml", node_ip="10.200.0.1", endpoint="unix:///x.sock",
                          cgroup_root="/pysched-real-abc", ca=tmp_path / "ca.crt",
                          tls=(tmp_path / "t.crt", tmp_path / "t.key"), pod_logs=tmp_path / "logs",
                          volume_plugins=tmp_path / "vp")
    cfg = yaml.safe_load(path.read_text())
    assert cfg["makeIPTablesUtilChains"] is False
    assert (cfg["cgroupDriver"], cfg["failCgroupV1"], cfg["cgroupRoot"]) == ("cgroupfs", False, "/pysched-real-abc")
    assert cfg["address"] == cfg["healthzBindAddress"] == "10.200.0.1"
    assert (cfg["volumePluginDir"], cfg["podLogsDir"]) == (str(tmp_path / "vp"), str(tmp_path / "logs"))
    assert cfg["readOnlyPort"] == 0 and cfg["authentication"]["anonymous"]["enabled"] is False


def test_kubelet_tunable_files_name_their_proc_sys_paths(tmp_path):
    """The namespace script mounts each file over /proc/sys/<name with . as />."""
    d = kubelet.write_tunables(tmp_path / "sysctl")
    mapped = {}
    for f in d.iterdir():
        path = subprocess.run(["sh", "-c", 'basename "$1" | tr . /', "sh", str(f)], capture_output=True, text=True,
                              check=True).stdout.strip()
        mapped[path] = f.read_text().strip()
    assert mapped == kubelet.KERNEL_TUNABLES
    if sys.platform == "linux":
        assert all((Path("/proc/sys") / p).exists() for p in mapped)


def test_kubelet_argv_execs_the_kubelet(tmp_path):
    argv = kubelet.argv(Path("/bin/kubelet"), ns_dir=tmp_path, config_file=tmp_path / "c", kubeconfig=tmp_path / "k",
                        root_dir=tmp_path / "root", node_name="n", node_ip="10.200.0.1")
    assert argv[:4] == ["unshare", "-m", "--propagation", "unchanged"]   # no --fork: the PID stays the kubelet's
    assert 'exec "$@"' in argv[6] and argv[10] == "/bin/kubelet"
    assert "/var/lib" in argv[6] and "/var/log" in argv[6]


def test_containerd_configuration_keeps_to_its_directory(tmp_path):
    c = containerd.Containerd(tmp_path / "ctd", cni_conf_dir=tmp_path / "net.d", sandbox_image="localhost/p:1",
                              log=tmp_path / "log")
    cfg = tomllib.loads(c.write_config().read_text())
    cri = cfg["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True and cri["netns_mounts_under_state_dir"] is True
    assert cri["sandbox_image"] == "localhost/p:1"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    paths = [cfg["root"], cfg["state"], cfg["grpc"]["address"], cfg["plugins"]["io.containerd.internal.v1.opt"]["path"],
             cri["containerd"]["runtimes"]["runc"]["options"]["Root"]]
    assert all(p.startswith(str(tmp_path / "ctd")) for p in paths), paths
    assert cri["cni"]["conf_dir"] == str(tmp_path / "net.d")
    assert "/run" in containerd.OVERLAID and "/var/lib" in containerd.OVERLAID


def _tar(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_archive_names(tmp_path):
    docker = _tar(tmp_path / "d.tar", {"manifest.json": json.dumps([{"RepoTags": ["localhost/a:1", "b:2"]}]).encode()})
    assert containerd.archive_names(docker) == (["localhost/a:1", "b:2"], False)
    index = {"manifests": [{"annotations": {"org.opencontainers.image.ref.name": "localhost/pysched:0.3"}},
                           {"annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    oci = _tar(tmp_path / "o.tar", {"oci-layout": b"{}", "index.json": json.dumps(index).encode()})
    assert containerd.archive_names(oci) == (["localhost/pysched:0.3"], True)
    with pytest.raises(RealClusterError, match="neither"):
        containerd.archive_names(_tar(tmp_path / "x.tar", {"a": b""}))


@pytest.mark.parametrize("name,stored", [("pause", "docker.io/library/pause:latest"),
                                         ("library/x:1", "docker.io/library/x:1"),
                                         ("localhost/p:1", "localhost/p:1"),
                                         ("ghcr.io/pysched/pysched:0.2.0", "ghcr.io/pysched/pysched:0.2.0"),
                                         ("localhost:5000/p", "localhost:5000/p:latest")])
def test_normalize(name, stored):
    assert containerd.normalize(name) == stored


def test_host_state_diff():
    a = HostState(rules={"iptables-save": ["*filter", "COMMIT"]}, sysctls={"net.ipv4.ip_forward": "0"},
                  netns=[], paths={"/var/lib/cni": False})
    b = HostState(rules={"iptables-save": ["*filter", ":KUBE-FIREWALL -", "COMMIT"]},
                  sysctls={"net.ipv4.ip_forward": "1"}, netns=["cni-1"], paths={"/var/lib/cni": True})
    assert a.diff(a) == []
    assert a.diff(b) == ["iptables-save: added :KUBE-FIREWALL -", "sysctl net.ipv4.ip_forward: 0 -> 1",
                         "netns added: cni-1", "/var/lib/cni: created"]


def test_daemon_failure_names_the_piece_and_quotes_its_log(tmp_path):
    d = Daemon("thing", ["sh", "-c", "echo the reason; exit 3"], tmp_path / "thing.log").start()
    with pytest.raises(RealClusterError) as err:
        d.wait_ready(lambda: False, timeout=30, what="serving")
    assert err.value.piece == "thing"
    assert "exited with code 3 before it was serving" in str(err.value) and "the reason" in str(err.value)


def test_daemon_pid_is_the_process_and_stop_ends_it(tmp_path):
    """A wrapper shell that ends in exec leaves the daemon at the PID recorded (real-node.md §3)."""
    marker = f"pysched-test-{random.getrandbits(40)}"
    d = Daemon("sleeper", ["sh", "-c", 'exec "$0" -c "import time; time.sleep(300)" "$1"', sys.executable, marker],
               tmp_path / "s.log").start()
    d.wait_ready(lambda: marker.encode() in Path(f"/proc/{d.pid}/cmdline").read_bytes(), timeout=30)
    assert pids_referencing(marker) == [d.pid]
    d.stop(grace=5)
    assert not d.alive()


def test_kill_pids(tmp_path):
    marker = f"pysched-test-{random.getrandbits(40)}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    try:
        while not pids_referencing(marker) and proc.poll() is None:   # until it has exec'd
            time.sleep(0.01)
        assert pids_referencing(marker) == [proc.pid]
        kill_pids(pids_referencing(marker))
        assert proc.wait(10) != 0
    finally:
        proc.kill()


def test_cli_arguments_and_timings():
    assert cli.parse_args(["--kwok-nodes", "5", "--image", "a.tar", "--image", "b.tar"]).image == ["a.tar", "b.tar"]
    with pytest.raises(SystemExit):
        cli.parse_args(["--kwok-nodes", "-1"])
    assert cli.format_timings({"etcd": 0.5, "total": 10.25}) == (
        "  etcd                        0.50 s\n  total                      10.25 s")
