"""A real one-node Slurm 22.05 (Debian bookworm packages) inside a simulated node, for integration tests.

    node = SlurmNode("mi300x-8gpu-2cpu").start()
    node.configure(gres_conf_text, "Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 Gres=gpu:mi300x:8")
    tasks = node.probe("-n2", "--gpus-per-task=1")      # per task: the GPU variables, CPUs and memory nodes
    node.stop()

The node is a container of sim/cluster.py (`start_node`), named ``tt-slurm-<pid>-<profile>``; its hostname is the
Slurm NodeName and SlurmctldHost. munged, slurmctld and slurmd run as the packages' systemd units (disabled in the
image, started here); slurmd gets ``HWLOC_FSROOT=/sim`` through /etc/default/slurmd when asked, so hwloc (Slurm's
CPU topology source) reads the simulated machine instead of the container's real CPUs.

slurm.conf (``SLURM_CONF`` + the node line + one partition), and why:

- ``CommunicationParameters=EnableIPv6``: the node has only a loopback interface (``--network none``). Slurm
  resolves names with ``getaddrinfo(AF_INET, AI_ADDRCONFIG)``, which glibc answers with EAI_NONAME when no
  non-loopback IPv4 address is configured ("slurm_set_addr: Unable to resolve", slurmd then dies with
  "Unable to bind listen port (6818)"). With IPv6 enabled Slurm asks for AF_UNSPEC, which resolves.
- ``ProctrackType=proctrack/linuxproc``: proctrack/cgroup fails in the container (cgroup v1 host, "unable to create cgroup
  '/sys/fs/cgroup/freezer(null)' : Read-only file system", "slurmd initialization failed"); linuxproc tracks
  tasks through /proc parentage and needs no cgroup. No cgroup.conf, no device constraint.
- ``TaskPlugin=task/affinity``: binds with sched_setaffinity (and set_mempolicy for --mem-bind), no cgroup.
- ``SelectType=select/cons_tres`` + ``CR_Core``, ``GresTypes=gpu``; no accounting, ``MpiDefault=none``.

Leftover nodes of an interrupted run: ``sim/cluster.py down --prefix tt-slurm``.

GPU device files: slurmd wants ``File=`` to be a character or block device. A regular file (the sysroot's
/sim/dev/dri/renderD*) is logged as "not a valid character or block device" and the GPUs still register, but tasks
then get no GPU variables; a missing path makes slurmd wait ~20 s and exit. ``make_devices()`` creates
``/dev/dri/renderD<128+i>`` as character devices 226:<128+i> (the DRM major; Docker's default device rules allow
mknod of any character device but not opening it), which is all slurmd needs (it only stats them).
"""

import importlib.util
import os
import re
import shlex
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = "tt-slurm"
SLURM_CONF = """\
ClusterName=topotune
SlurmctldHost={host}
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
CommunicationParameters=EnableIPv6
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
"""
PARTITION = "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
# What each task reports: the variables Slurm sets for GPUs and tasks, and /proc/self/status binding lines.
PROBE_VARS = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
              "SLURM_GPUS_ON_NODE",
              "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
              # set by topotune-bind, and by test_slurm_launch.py's probe (numactl's memory policy)
              "TOPOTUNE_GPU", "TOPOTUNE_VISIBLE_GPUS", "HSA_OVERRIDE_CPU_AFFINITY_DEBUG", "TT_POLICY")
PROBE = "/usr/local/bin/tt-probe"
PROBE_SCRIPT = r"""#!/bin/sh
# one line per task: NAME=value for each variable that is set (unset ones are left out), then the binding
line=""
for v in %s; do
  eval "isset=\${$v+set}"
  if [ "$isset" = set ]; then eval "line=\"\$line $v=\$$v\""; fi
done
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "TTPROBE$line Cpus_allowed_list=$cpus Mems_allowed_list=$mems"
""" % " ".join(PROBE_VARS)


def _cluster():
    spec = importlib.util.spec_from_file_location("topotune_sim_cluster", os.path.join(REPO, "sim", "cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SlurmError(RuntimeError):
    pass


class SlurmNode:
    def __init__(self, profile, name=None):
        self.profile = profile
        self.name = name or "%s-%d-%s" % (PREFIX, os.getpid(), profile)
        self.hwloc_fsroot = None
        # the controller directory of the node's hardware tree (sim/cluster.py builds it; mounted at /sim)
        self.tree = _cluster().tree_of(self.name)

    # --- container ---------------------------------------------------------------------------------------------
    def start(self):
        try:
            _cluster().start_node(self.name, self.profile)
        except SystemExit as exc:  # sim/cluster.py reports docker failures as SystemExit
            raise SlurmError(str(exc)) from None
        if self.run(["sh", "-c", "command -v slurmctld && command -v munged"]).returncode != 0:
            raise SlurmError("%s: no Slurm in the node image; rebuild it: sim/image/build-image.sh" % self.name)
        # Slurm resolves its NodeName/SlurmctldHost: the hostname must resolve (docker's --network none hosts
        # file does not list it)
        self.sh("grep -q ' %s$' /etc/hosts || echo '127.0.0.1 %s' >> /etc/hosts" % (self.name, self.name))
        self.sh("cat > %s && chmod 0755 %s" % (PROBE, PROBE), stdin=PROBE_SCRIPT)
        return self

    def stop(self):
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, check=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def run(self, argv, stdin=None, timeout=120, env=None):
        """Run argv in the node; CompletedProcess (text)."""
        cmd = ["docker", "exec"] + (["-i"] if stdin is not None else [])
        for key, value in (env or {}).items():
            cmd += ["-e", "%s=%s" % (key, value)]
        return subprocess.run(cmd + [self.name] + list(argv), input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def sh(self, script, stdin=None, check=True, timeout=120):
        proc = self.run(["sh", "-c", script], stdin=stdin, timeout=timeout)
        if check and proc.returncode != 0:
            raise SlurmError("%s: `%s` failed (%d): %s%s" % (self.name, script, proc.returncode, proc.stdout, proc.stderr))
        return proc

    def write(self, path, text):
        self.sh("mkdir -p %s && cat > %s" % (shlex.quote(os.path.dirname(path)), shlex.quote(path)), stdin=text)

    def make_devices(self, count, major=226, first_minor=128):
        """Character devices /dev/dri/renderD<first_minor + i> (major:minor as given), for gres.conf File=."""
        self.sh("mkdir -p /dev/dri && for i in $(seq 0 %d); do m=$((%d + i)); "
                "[ -c /dev/dri/renderD$m ] || mknod -m 0660 /dev/dri/renderD$m c %d $m; done"
                % (count - 1, first_minor, major))

    # --- Slurm -------------------------------------------------------------------------------------------------
    def slurm_conf(self, node_line, extra=()):
        if not node_line.startswith("NodeName="):
            node_line = "NodeName=%s %s" % (self.name, node_line)
        return SLURM_CONF.format(host=self.name) + "".join(line + "\n" for line in extra) + node_line + "\n" + PARTITION + "\n"

    def configure(self, gres_conf, node_line, hwloc_fsroot=True, extra=(), wait_idle=True):
        """(Re)write slurm.conf/gres.conf, restart munged, slurmctld and slurmd with fresh state; wait until IDLE.

        node_line: the slurm.conf NodeName line, or its attributes (NodeName=<hostname> is then prepended).
        hwloc_fsroot: True for /sim, a path, or False (slurmd sees the container's real CPUs).
        extra: further slurm.conf lines (e.g. "SlurmdParameters=numa_node_as_socket")."""
        self.hwloc_fsroot = "/sim" if hwloc_fsroot is True else (hwloc_fsroot or None)
        # jobs of an earlier configuration end first (their slurmstepd would outlive slurmd)
        self.sh("scancel -u root 2>/dev/null; for i in $(seq 1 50); do pgrep -x slurmstepd >/dev/null || break; "
                "sleep 0.2; done", check=False)
        self.sh("systemctl stop slurmd slurmctld; rm -rf /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/*; "
                ": > /var/log/slurm/slurmd.log; : > /var/log/slurm/slurmctld.log", check=False)
        self.write("/etc/slurm/slurm.conf", self.slurm_conf(node_line, extra))
        self.write("/etc/slurm/gres.conf", gres_conf)
        self.write("/etc/default/slurmd", "HWLOC_FSROOT=%s\n" % self.hwloc_fsroot if self.hwloc_fsroot else "")
        self.sh("systemctl start munge slurmctld slurmd")
        if wait_idle:
            self.wait_state("IDLE")
        return self

    def node_info(self):
        """scontrol show node as a dict (State without flags is state.split('+')[0])."""
        out = self.scontrol("show", "node", self.name, "-o", check=False)
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_state(self, want, timeout=60):
        deadline = time.monotonic() + timeout
        info = {}
        while time.monotonic() < deadline:
            info = self.node_info()
            if info.get("State", "").split("+")[0] == want:
                return info
            time.sleep(0.3)
        raise SlurmError("%s not %s within %ds: %s\n%s" % (self.name, want, timeout, info, self.logs()))

    def logs(self, lines=40):
        return self.sh("tail -n %d /var/log/slurm/slurmd.log /var/log/slurm/slurmctld.log; systemctl --no-pager "
                       "status slurmd slurmctld munge | tail -n 30" % lines, check=False).stdout

    def slurmd(self, *args, hwloc_fsroot=None):
        """slurmd -C / -G as a one-off command (with HWLOC_FSROOT as configured unless given): stdout + stderr."""
        root = self.hwloc_fsroot if hwloc_fsroot is None else (hwloc_fsroot or None)
        proc = self.run(["slurmd", *args], env={"HWLOC_FSROOT": root} if root else None)
        return proc.stdout + proc.stderr

    def scontrol(self, *args, check=True):
        proc = self.run(["scontrol", *args])
        if check and proc.returncode != 0:
            raise SlurmError("scontrol %s: %s" % (" ".join(args), proc.stderr))
        return proc.stdout

    def srun(self, *args, timeout=60):
        """srun with the given options/command in the node: CompletedProcess (returncode, stdout, stderr).

        Check the output, not only the exit status: srun 22.05 exits 0 when slurmstepd fails to launch the tasks
        ("task 0 launch failed: Slurmd could not execve job")."""
        return self.run(["timeout", str(timeout), "srun", *args], timeout=timeout + 10)

    def probe(self, *srun_args, timeout=60):
        """Run the probe under srun: per task (sorted by SLURM_PROCID) a dict of the variables that are set and
        Cpus_allowed_list / Mems_allowed_list. Raises SlurmError when srun fails."""
        proc = self.srun(*srun_args, PROBE, timeout=timeout)
        tasks = parse_probe(proc.stdout)
        if proc.returncode != 0 or not tasks:
            raise SlurmError("srun %s failed (%d):\n%s%s" % (" ".join(srun_args), proc.returncode, proc.stdout, proc.stderr))
        return tasks

    def sbatch(self, *args):
        """sbatch --parsable ...: the job id."""
        proc = self.run(["sbatch", "--parsable", *args])
        if proc.returncode != 0:
            raise SlurmError("sbatch %s: %s" % (" ".join(args), proc.stderr))
        return proc.stdout.strip().split(";")[0]

    def job(self, job_id):
        return dict(re.findall(r"(\w+)=(\S*)", self.scontrol("show", "job", "-d", "-o", str(job_id))))

    def wait_jobs_done(self, job_ids, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = {j: self.job(j).get("JobState") for j in job_ids}
            if all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for s in states.values()):
                return states
            time.sleep(0.3)
        raise SlurmError("jobs %s not done within %ds" % (job_ids, timeout))


def gres_records(text):
    """The `slurmd -G` lines ("slurmd: Gres Name=gpu Type=... Index=... File=... Cores=... CoreCnt=... Links=...")
    as dicts, in the order printed."""
    return [dict(re.findall(r"(\w+)=(\S*)", line.split("Gres ", 1)[1]))
            for line in text.splitlines() if re.match(r"slurmd: Gres ", line)]


def node_config(text):
    """The `slurmd -C` line as a dict (NodeName, CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, ...)."""
    line = next((x for x in text.splitlines() if x.startswith("NodeName=")), "")
    return dict(re.findall(r"(\w+)=(\S*)", line))


def parse_probe(text):
    tasks = []
    for line in text.splitlines():
        if line.startswith("TTPROBE"):
            tasks.append(dict(item.split("=", 1) for item in line.split()[1:]))
    return sorted(tasks, key=lambda t: int(t.get("SLURM_PROCID", -1)))
