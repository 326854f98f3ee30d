"""The launch files on each simulated node: contents, modes, and the wrapper's numactl argv per rank."""

import json

MI250X_NUMA = {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2}
RECORDER = "/tmp/topotune-numactl-recorder"
RECORDER_B64 = "IyEvYmluL3NoCnByaW50ZiAnJXNcbicgIiRAIgo="


def _profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


def _recorder(host):
    # a numactl stand-in that prints its argv, one per line (base64 of: printf '%%s\\n' "$@")
    host.run_test("echo %s | base64 -d > %s && chmod 0755 %s" % (RECORDER_B64, RECORDER, RECORDER))


def test_files_modes_and_owner(host):
    wrapper = host.file("/usr/local/bin/topotune-bind")
    assert wrapper.exists and wrapper.user == "root" and wrapper.mode == 0o755
    for name in ("README", "gres.conf"):
        f = host.file("/etc/topotune/launch/" + name)
        assert f.exists and f.user == "root" and f.mode == 0o644
    assert not host.run("find /etc/topotune /usr/local/bin -perm -o+w -type f").stdout.strip()


def test_env_files_per_profile(host):
    profile = _profile(host)
    listing = sorted(host.run("ls /etc/topotune/launch").stdout.split())
    if profile == "mi210-8gpu-2hive":
        assert "size2-group0.env" not in listing
        env = host.file("/etc/topotune/launch/size4-group0.env").content_string
        # the source article's recipe, derived where it is right
        assert "HIP_VISIBLE_DEVICES=0,1,2,3\n" in env and "TOPOTUNE_NUMA_NODES=0\n" in env
        readme = host.file("/etc/topotune/launch/README").content_string
        assert "HIP_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0 --membind=0 <command>" in readme
    else:
        assert "size2-group3.env" in listing and "size8-group0.env" in listing
    if profile == "mi250x-8gcd":
        env = host.file("/etc/topotune/launch/size2-group0.env").content_string
        assert "ROCR_VISIBLE_DEVICES=0,1\n" in env and "TOPOTUNE_NUMA_NODES=3\n" in env
        assert "HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0\n" in env


def test_gres_fragment(host):
    gres = host.file("/etc/topotune/launch/gres.conf").content_string
    lines = [line for line in gres.splitlines() if line.startswith("Name=gpu")]
    assert len(lines) == 8
    if _profile(host) == "fault-numa-minus1":
        assert all("Cores=" not in line for line in lines)
    elif _profile(host) == "mi250x-8gcd":
        assert lines[0] == "Name=gpu File=/dev/dri/renderD128 Cores=48-63,112-127"


def test_wrapper_argv_for_every_rank(host):
    _recorder(host)
    profile = _profile(host)
    for rank in range(8):
        out = host.run("LOCAL_RANK=%s TOPOTUNE_BIND_NUMACTL=%s /usr/local/bin/topotune-bind --size 8 echo hi",
                       str(rank), RECORDER)
        assert out.rc == 0, out.stderr
        argv = out.stdout.splitlines()
        if profile == "mi250x-8gcd":
            node = MI250X_NUMA[rank]
            assert argv == ["--cpunodebind=%d" % node, "--membind=%d" % node, "--", "echo", "hi"]
        elif profile == "mi210-8gpu-2hive":
            node = rank // 4
            assert argv == ["--cpunodebind=%d" % node, "--membind=%d" % node, "--", "echo", "hi"]
        else:
            assert argv == ["hi"] and "no known NUMA node" in out.stderr


def test_wrapper_real_numactl_exec(host):
    # GPU 4 of the MI250X profile sits on NUMA node 0, which exists in every container host
    if _profile(host) != "mi250x-8gcd":
        return
    out = host.run("SLURM_LOCALID=4 /usr/local/bin/topotune-bind sh -c "
                   "'echo $ROCR_VISIBLE_DEVICES $HSA_OVERRIDE_CPU_AFFINITY_DEBUG; numactl --show'")
    assert out.rc == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "0,1,2,3,4,5,6,7 0"
    assert any(line.startswith("membind: 0") for line in lines)
    assert any(line.startswith("nodebind: 0") or line.startswith("cpubind: 0") for line in lines)
    printed = host.check_output("/usr/local/bin/topotune-bind --print --rank 0 -- python3 train.py")
    assert "numactl --cpunodebind=3 --membind=3 -- python3 train.py" in printed
    json.dumps(printed)
