"""The launch files on each simulated node: contents, modes, the same files as the offline CLI renders, and the
wrapper's choice of GPU and CPUs per rank (real numactl on the container's real CPUs)."""

import os
import subprocess
import sys

MI250X_NUMA = {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2}
MI250X_NUMA_CPUS = {0: "0-15,64-79", 1: "16-31,80-95", 2: "32-47,96-111", 3: "48-63,112-127"}
WRAPPER = "/usr/local/bin/topotune-bind"


def _profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


def _print(host, env):
    out = host.run("%s %s --print -- app" % (env, WRAPPER))
    assert out.rc == 0, out.stderr
    lines = out.stdout.splitlines()
    return dict(line.split("=", 1) for line in lines[:-1]), lines[-1].strip(), out.stderr


def test_files_modes_and_owner(host):
    wrapper = host.file(WRAPPER)
    assert wrapper.exists and wrapper.user == "root" and wrapper.mode == 0o755
    for name in ("README", "gres.conf", "bind.table"):
        f = host.file("/etc/topotune/launch/" + name)
        assert f.exists and f.user == "root" and f.mode == 0o644
    assert not host.run("find /etc/topotune /usr/local/bin -perm -o+w -type f").stdout.strip()


def test_the_cli_renders_exactly_what_the_role_wrote(host):
    """bin/topotune launch (plain offline code) on the node's hardware tree gives the node's files byte for byte."""
    name = host.backend.get_hostname()
    # the tree this node mounts at /sim (scripts/test keeps the trees on a tmpfs; docker knows where)
    sysroot = subprocess.run(["docker", "inspect", "-f", '{{range .Mounts}}{{if eq .Destination "/sim"}}{{.Source}}'
                              '{{end}}{{end}}', name], capture_output=True, text=True, check=True).stdout.strip()
    repo = os.environ["MOLECULE_PROJECT_DIRECTORY"]
    options = host.ansible.get_variables()
    visible = options.get("launch_templates_visible_devices_env", "ROCR_VISIBLE_DEVICES")
    argv = [sys.executable, os.path.join(repo, "bin", "topotune"), "launch", "--sysroot", sysroot, "--dev-dir", "/sim/dev",
            "--node-name", host.check_output("hostname -s"), "--visible-devices-env", visible]
    for size in options.get("launch_templates_sizes", [2, 4, 8]):
        argv += ["--size", str(size)]
    for fmt, path in (("gres", "gres.conf"), ("table", "bind.table"), ("readme", "README")):
        rendered = subprocess.run(argv + ["--format", fmt], capture_output=True, text=True, check=True).stdout
        assert rendered == host.file("/etc/topotune/launch/" + path).content_string, path


def test_env_files_per_profile(host):
    profile = _profile(host)
    listing = sorted(host.run("ls /etc/topotune/launch").stdout.split())
    if profile == "mi210-8gpu-2hive":
        assert "size2-group0.env" not in listing
        env = host.file("/etc/topotune/launch/size4-group1.env").content_string
        # a container given GPUs 4-7 only numbers them 0-3
        assert "HIP_VISIBLE_DEVICES=0,1,2,3\n" in env and "TOPOTUNE_GROUP_GPUS=4,5,6,7\n" in env
        readme = host.file("/etc/topotune/launch/README").content_string
        # the source article's recipe, derived where it is right
        assert "HIP_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0 --membind=0 <command>" in readme
    else:
        assert "size2-group3.env" in listing and "size8-group0.env" in listing
    if profile == "mi250x-8gcd":
        env = host.file("/etc/topotune/launch/size2-group0.env").content_string
        assert "ROCR_VISIBLE_DEVICES=0,1\n" in env and "TOPOTUNE_NUMA_NODES=3\n" in env
        assert "HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0\n" in env


def test_gres_fragment(host):
    gres = host.file("/etc/topotune/launch/gres.conf").content_string
    lines = [line for line in gres.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 8
    # this node's lines, AutoDetect off (slurmd would drop GPUs whose Links differ from rsmi's)
    prefix = "NodeName=%s AutoDetect=off " % host.check_output("hostname -s")
    assert all(line.startswith(prefix) for line in lines)
    lines = [line[len(prefix):] for line in lines]
    if _profile(host) == "fault-numa-minus1":
        assert all("Cores=" not in line for line in lines)
    elif _profile(host) == "mi250x-8gcd":
        # Type from the generation, logical cores of NUMA node 3, the GCD's xGMI link counts
        assert lines[0] == ("Name=gpu Type=mi250x File=/sim/dev/dri/renderD128 Cores=48-63 Links=-1,4,1,0,0,0,2,0 "
                            "Flags=amd_gpu_env")
        assert "SlurmdParameters=numa_node_as_socket" in gres


def test_wrapper_picks_each_ranks_gpu_and_its_numa_cpus(host):
    profile = _profile(host)
    for rank in range(8):
        values, cmd, stderr = _print(host, "LOCAL_RANK=%d" % rank)
        assert values["TOPOTUNE_GPU"] == str(rank) and values["TOPOTUNE_GPU_SOURCE"] == "the GPUs this process can open"
        if profile == "mi250x-8gcd":
            assert values["TOPOTUNE_BIND_CPUS"] == MI250X_NUMA_CPUS[MI250X_NUMA[rank]]
            assert values["ROCR_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        elif profile == "mi210-8gpu-2hive":
            assert values["HIP_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        else:
            assert cmd == "app" and "no known NUMA node" in stderr


def test_wrapper_binds_for_real_within_the_containers_cpus(host):
    # GCD 4 of the MI250X profile is on NUMA node 0, whose CPUs 0-15 include the container's real ones
    if _profile(host) != "mi250x-8gcd":
        return
    allowed = host.check_output("grep Cpus_allowed_list /proc/self/status").split()[-1]
    out = host.run("SLURM_LOCALID=4 %s sh -c 'echo $ROCR_VISIBLE_DEVICES $HSA_OVERRIDE_CPU_AFFINITY_DEBUG; "
                   "grep Cpus_allowed_list /proc/self/status'" % WRAPPER)
    assert out.rc == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "0,1,2,3,4,5,6,7 0"
    assert lines[1].split()[-1] == allowed  # NUMA node 0 CPUs intersected with what the container has
    # GCD 0 is on NUMA node 3: none of its CPUs exist here, so it runs unbound and says why
    out = host.run("SLURM_LOCALID=0 %s true" % WRAPPER)
    assert out.rc == 0 and "are all outside the CPUs this process may use" in out.stderr
