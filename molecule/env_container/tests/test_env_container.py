"""rocm_env + container_runtime on simulated nodes: file contents, ownership and modes; daemon.json merge."""

import json

import pytest
import yaml

PROFILE_D = "/etc/profile.d/topotune-rocm.sh"
FLAG_DIR = "/etc/topotune/container"
UNRELATED = {"log-driver", "registry-mirrors", "live-restore", "default-ulimits"}


@pytest.fixture(scope="module")
def hostvars(host):
    return host.ansible.get_variables()


@pytest.fixture(scope="module")
def env_file(hostvars):
    return "/etc/topotune/env/%s.env" % hostvars["rocm_env_profile"]


def sourced_env(host):
    out = host.check_output("env -i /bin/sh -c '. %s; env'" % PROFILE_D)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def env_file_values(host, path):
    lines = host.file(path).content_string.splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


@pytest.mark.parametrize("path", [PROFILE_D, "/etc/topotune/env", FLAG_DIR, "/etc/docker/daemon.json"])
def test_files_are_root_owned_and_not_world_writable(host, path):
    f = host.file(path)
    assert f.exists and f.user == "root" and f.group == "root"
    assert not f.mode & 0o002


def test_profile_files_are_0644(host, env_file):
    for path in (PROFILE_D, env_file):
        f = host.file(path)
        assert f.mode == 0o644 and f.user == "root" and "Ansible managed" in f.content_string


def test_shell_profile_and_env_file_agree(host, env_file):
    from_shell = sourced_env(host)
    from_file = env_file_values(host, env_file)
    assert from_file and all(from_shell.get(k) == v for k, v in from_file.items())


def test_profile_content_per_node(host, hostvars, env_file):
    values = env_file_values(host, env_file)
    profile = hostvars["rocm_env_profile"]
    if profile == "rdma-training":
        # the source article's block on MI250X / ROCm 5.7.1: refused variables are not rendered
        assert "HSA_OVERRIDE_GFX_VERSION" not in values and "NCCL_PROTO" not in values
        assert values["NCCL_ALGO"] == "Tree" and values["NCCL_NET_GDR_LEVEL"] == "3"
        assert values["TORCH_NCCL_HIGH_PRIORITY"] == "1" and values["HIP_FORCE_DEV_KERNARG"] == "1"
        assert "NCCL_MIN_NCHANNELS" not in values  # MI300X-only: dropped on gfx90a
    elif profile == "xgmi-training":
        # MI300X / ROCm 6.4.1: HIP_FORCE_DEV_KERNARG is the default and is dropped
        assert "HIP_FORCE_DEV_KERNARG" not in values
        assert values["NCCL_MIN_NCHANNELS"] == "112" and values["NCCL_IB_HCA"] == "rdma0,rdma1"
        assert values["HSA_OVERRIDE_CPU_AFFINITY_DEBUG"] == "0"
    else:
        assert values == {
            "HSA_ENABLE_SDMA": "0",
            "HSA_OVERRIDE_CPU_AFFINITY_DEBUG": "0",
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
        }


def test_flag_files_cover_the_render_nodes_per_group(host, hostvars):
    size = int(hostvars.get("container_runtime_group_size", 0))
    minors = sorted(host.check_output("ls /sim/dev/dri | grep renderD").split())
    files = sorted(host.check_output("ls %s" % FLAG_DIR).split())
    flag_files = [f for f in files if f.endswith(".flags")]
    assert flag_files == (["all.flags"] if size == 0 else ["group-%d.flags" % i for i in range(len(minors) // size)])
    seen = []
    for name in flag_files:
        f = host.file("%s/%s" % (FLAG_DIR, name))
        assert f.mode == 0o644 and f.user == "root"
        flags = [line for line in f.content_string.splitlines() if line and not line.startswith("#")]
        assert flags[0] == "--device=/dev/kfd"
        group_minors = [fl.rsplit("/", 1)[1] for fl in flags if "renderD" in fl]
        assert len(group_minors) == (size or len(minors))
        seen += group_minors
        gid = host.group("render").gid
        assert "--group-add=%d" % gid in flags
        assert not any("privileged" in fl or "SYS_RAWIO" in fl for fl in flags)
        assert ("--cap-add=SYS_PTRACE" in flags) == (hostvars["rocm_env_profile"] == "debug")
        assert ("--device=/dev/infiniband" in flags) == (hostvars["rocm_env_profile"] == "rdma-training")
        assert "--security-opt=seccomp=unconfined" in flags
        assert "--env-file=/etc/topotune/env/%s.env" % hostvars["rocm_env_profile"] in flags
    assert sorted(seen) == minors


def test_compose_fragment_matches_the_flag_files(host):
    f = host.file("%s/compose.gpu.yml" % FLAG_DIR)
    assert f.mode == 0o644 and f.user == "root"
    services = yaml.safe_load(f.content_string)["services"]
    names = sorted(n[:-6] for n in host.check_output("ls %s" % FLAG_DIR).split() if n.endswith(".flags"))
    assert sorted(services) == ["topotune-gpu-%s" % n for n in names]
    for service in services.values():
        assert service["devices"][0] == "/dev/kfd" and service["group_add"] == [str(host.group("render").gid)]


def test_daemon_json_keeps_every_unrelated_key(host, hostvars):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert UNRELATED <= set(config)
    assert config["log-driver"] == "journald" and config["live-restore"] is True
    assert config["default-ulimits"]["nofile"]["Soft"] == 65536
    managed = hostvars.get("container_runtime_daemon_json_manage", False)
    assert ("memlock" in config["default-ulimits"]) == managed
    backups = host.check_output("ls /etc/docker").split()
    assert (len([b for b in backups if b.startswith("daemon.json.")]) == 1) == managed
    assert host.file("/etc/docker/daemon.json").mode == 0o644
