"""Interrupted writes: a writer module killed (SIGKILL) at any point leaves every file wholly old or wholly new,
and the next run removes what the kill left and converges (a second run then reports changed=false).

For each writer (managed_files, launch_templates, docker_daemon_config) the module goes from a known old set of
files to a known new one, and is killed, once per trial:

- at every step that changes the tree, in turn: before each open-for-write, write (and half-way through it),
  chown, chmod, fsync, rename, unlink, symlink, mkdir under the trial's root. The hook that counts the steps and
  kills is installed by this test in the module's process from outside (it wraps ``os`` functions and ``open``);
  the modules carry no test hook;
- at random times from outside (``kill -9`` by the parent), a random delay after the module's first write step,
  within the writing window the counting run measured.

After each kill every path is compared byte for byte (content, mode, owner) with its old and its new version;
any other file is something the kill left (a temp file). Then the module runs again: no temp file may remain and
the tree must be the new version; a further run must report changed=false. The figures are printed, and recorded
in docs/drift.md ("Interrupted writes").

Each module run is a fresh process, as Ansible runs it (``python -m <module> args.json`` with
``{"ANSIBLE_MODULE_ARGS": ...}``): a runner that has imported ``ansible.module_utils.basic`` once forks a child per
run, which runs the module exactly as ``python -m`` does (``runpy``, ``__main__``, the args file as ``argv[1]``);
forking saves the 80 ms import of every run and keeps the test under a minute on two cores.
"""

import json
import os
import random
import shutil
import stat
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO, ".cache", "collections")
MODULES = "ansible_collections.topotune.instinct.plugins.modules."
WRAPPER = os.path.join(REPO, "roles", "launch_templates", "files", "topotune-bind")
MIN_INTERRUPTIONS = 50
RANDOM_KILLS = 10

# The runner: reads one JSON request per line, forks a child per request and answers with how it ended.
# In the child, every step that changes something under "root" is counted (and timed, for "count") and the child
# kills itself with SIGKILL before step number "kill_at". With "kill_after", the runner kills the child that many
# seconds after its first step.
RUNNER = r'''
import builtins, ctypes, io, json, os, runpy, signal, sys, time, traceback
import ansible.module_utils.basic  # noqa: F401 - imported once, before forking: what makes a run cheap

# A child killed while run_command() forks its validate command leaves that fork running for a moment, holding the
# temp file's descriptor (and so its lock) until it execs. Between two real runs that moment is long past; here the
# next run starts milliseconds later, so the runner adopts such orphans (PR_SET_CHILD_SUBREAPER) and waits for them.
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def inject(root, kill_at, ops, start, notify):
    prefix = root.rstrip(os.sep) + os.sep
    fds = set()
    state = {"n": 0}

    def under(path):
        if isinstance(path, int):
            return path in fds
        try:
            return os.path.abspath(os.fsdecode(path)).startswith(prefix)
        except (TypeError, ValueError):
            return False

    def step(name):
        state["n"] += 1
        ops.append([name, time.monotonic() - start])
        if state["n"] == 1:
            os.write(notify, b"1")  # the runner's clock for a random kill starts at the first write step
        if state["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(module, name, check):
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            if check(*args, **kwargs):
                step(name)
            return real(*args, **kwargs)
        setattr(module, name, wrapped)

    real_open, real_write = os.open, os.write

    def os_open(path, flags, *args, **kwargs):
        tracked = under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        if tracked:
            step("open")
        fd = real_open(path, flags, *args, **kwargs)
        if tracked:
            fds.add(fd)
        return fd

    def os_write(fd, data):
        if fd in fds:
            step("write")
            half = len(data) // 2
            if half and state["n"] + 1 == kill_at:
                real_write(fd, bytes(memoryview(data)[:half]))
            step("write-half")
        return real_write(fd, data)

    os.open, os.write = os_open, os_write
    for name in ("chmod", "chown", "lchown", "unlink", "remove", "rmdir", "mkdir", "utime", "truncate"):
        wrap(os, name, lambda path, *args, **kwargs: under(path))
    for name in ("fchmod", "fchown", "fsync", "fdatasync", "ftruncate"):
        wrap(os, name, lambda fd, *args, **kwargs: fd in fds)
    for name in ("rename", "replace", "link"):
        wrap(os, name, lambda src, dst, *args, **kwargs: under(src) or under(dst))
    wrap(os, "symlink", lambda src, dst, *args, **kwargs: under(dst))
    builtin_open = open

    def py_open(file, mode="r", *args, **kwargs):
        if under(file) and set(mode) & set("wax+"):
            step("open")
        return builtin_open(file, mode, *args, **kwargs)
    builtins.open = py_open
    import io
    io.open = py_open


def child(req, start, notify):
    out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.close(out)
    ops = []
    if req["count"] or req["kill_at"] or req["kill_after"] is not None:
        inject(req["root"], req["kill_at"], ops, start, notify)
    sys.argv = [req["module"], req["args"]]
    code = 0
    try:
        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    if req["count"]:
        with builtins_open(req["ops"], "w") as handle:
            json.dump(ops, handle)
    os._exit(code)


builtins_open = builtins.open
for line in sys.stdin:
    req = json.loads(line)
    start = time.monotonic()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        child(req, start, write_end)
    os.close(write_end)
    if req["kill_after"] is not None and os.read(read_end, 1):  # b"" when the child ended without writing
        time.sleep(req["kill_after"])
        os.kill(pid, signal.SIGKILL)  # a child that already exited is a zombie until waited for: no effect
    status = os.waitpid(pid, 0)[1]
    while True:  # the killed child's orphans, adopted by this subreaper
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    os.close(read_end)
    signaled = os.WIFSIGNALED(status)
    answer = {"signaled": signaled, "code": None if signaled else os.WEXITSTATUS(status), "elapsed": time.monotonic() - start}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
'''


class Runner:
    """The forking runner process; run() runs one module in a fresh child process."""

    def __init__(self, work):
        self.work = work
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        self.proc = subprocess.Popen([sys.executable, "-c", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)

    def run(self, module, args_file, root, kill_at=None, kill_after=None, count=False):
        out, ops = os.path.join(self.work, "out.json"), os.path.join(self.work, "ops.json")
        for path in (out, ops):
            if os.path.exists(path):
                os.unlink(path)
        req = {"module": MODULES + module, "args": args_file, "root": root, "out": out, "ops": ops,
               "kill_at": kill_at, "kill_after": kill_after, "count": count}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        with open(out) as handle:
            text = handle.read()
        answer["result"] = json.loads(text) if answer["code"] is not None and text.strip() else None
        answer["output"] = text[-2000:]  # for failure messages (a result may echo megabytes of content)
        if count:
            with open(ops) as handle:
                answer["ops"] = json.load(handle)
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    work = tmp_path_factory.mktemp("runner")
    proc = Runner(str(work))
    yield proc
    proc.close()


def snapshot(root):
    """{relative path: ("file", bytes, mode, uid, gid) | ("link", target)} of everything but directories."""
    state = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(info.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    state[rel] = ("file", handle.read(), info.st_mode & 0o7777, info.st_uid, info.st_gid)
    return state


def restore(root, state):
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for rel, entry in sorted(state.items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if entry[0] == "link":
            os.symlink(entry[1], path)
            continue
        with open(path, "wb") as handle:
            handle.write(entry[1])
        if os.geteuid() == 0:
            os.chown(path, entry[3], entry[4])
        os.chmod(path, entry[2])


class Drill:
    """One writer's old and new versions, and the checks of a tree against them."""

    def __init__(self, runner, module, root, old_args, new_args, backup_of=None):
        self.runner, self.module, self.root = runner, module, root
        self.backup_of = backup_of  # relative path whose backups (<path>.<pid>.<date>~) the module may write
        self.figures = {"writer": module, "step_kills": 0, "random_kills": 0, "random_kills_mid_write": 0,
                        "partial_files": 0, "temps_left_by_kills": 0, "leftover_temps": 0, "second_run_changed": 0}
        self.problems = []
        self.old_args, self.new_args = old_args, new_args

    def run(self, args_file, **kwargs):
        return self.runner.run(self.module, args_file, self.root, **kwargs)

    def prepare(self, initial):
        restore(self.root, initial)
        first = self.run(self.old_args)
        assert first["code"] == 0, first["output"]
        self.old = self.split(snapshot(self.root))[0]
        counted = self.run(self.new_args, count=True)
        assert counted["code"] == 0 and counted["result"]["changed"], counted["output"]
        self.new, backups = self.split(snapshot(self.root))
        assert self.new != self.old and not self.strays(self.new)
        assert len(backups) == (1 if self.backup_of else 0)
        again = self.run(self.new_args)
        assert again["code"] == 0 and not again["result"]["changed"], again["output"]
        self.steps = counted["ops"]
        return self.steps

    def is_backup(self, rel):
        return self.backup_of is not None and rel.startswith(self.backup_of + ".") and rel.endswith("~")

    def split(self, state):
        backups = {rel: entry for rel, entry in state.items() if self.is_backup(rel)}
        return {rel: entry for rel, entry in state.items() if rel not in backups}, backups

    def strays(self, state):
        return sorted(rel for rel in state if rel not in self.old and rel not in self.new)

    def check(self, label, after_kill):
        """Compare the tree with the two versions; returns whether it is strictly between them."""
        state, backups = self.split(snapshot(self.root))
        partial = [rel for rel in set(self.old) | set(self.new) if state.get(rel) not in (self.old.get(rel), self.new.get(rel))]
        for rel, entry in backups.items():
            if entry[:2] != self.old[self.backup_of][:2]:
                partial.append(rel)
        strays = self.strays(state)
        self.figures["partial_files"] += len(partial)
        if partial:
            self.problems.append("%s: neither old nor new: %s" % (label, sorted(partial)))
        if after_kill:
            self.figures["temps_left_by_kills"] += len(strays)
        elif strays:
            self.figures["leftover_temps"] += len(strays)
            self.problems.append("%s: left behind: %s" % (label, strays))
        mixed = any(state.get(rel) != self.old.get(rel) for rel in set(self.old) | set(self.new))
        return bool(strays) or (mixed and state != self.new)

    def trial(self, label, **kill):
        restore(self.root, self.old)
        killed = self.run(self.new_args, **kill)
        between = self.check(label + " after the kill", after_kill=True)
        converge = self.run(self.new_args)
        if converge["code"] != 0:
            self.problems.append("%s: the next run failed: %s" % (label, converge["output"]))
            return killed, between
        self.check(label + " after the next run", after_kill=False)
        state = self.split(snapshot(self.root))[0]
        if {rel: entry for rel, entry in state.items() if rel in self.new or rel in self.old} != self.new:
            self.problems.append("%s: the next run did not reach the new version" % label)
        second = self.run(self.new_args)
        if second["code"] != 0 or second["result"]["changed"]:
            self.figures["second_run_changed"] += 1
            self.problems.append("%s: the second run reported changed or failed: %s" % (label, second["output"]))
        return killed, between

    def drill(self, initial, seed):
        start = time.monotonic()
        steps = self.prepare(initial)
        for number in range(1, len(steps) + 1):
            killed, _between = self.trial("kill before step %d (%s)" % (number, steps[number - 1][0]), kill_at=number)
            assert killed["signaled"], "step %d was not reached: the module's steps are not deterministic" % number
            self.figures["step_kills"] += 1
        # random kills from outside, spread over the writing window measured by the counting run
        window = steps[-1][1] - steps[0][1]
        rng = random.Random(seed)
        for number in range(max(RANDOM_KILLS, MIN_INTERRUPTIONS - len(steps))):
            delay = rng.uniform(0, window * 1.2)
            killed, between = self.trial("random kill %d at %.1f ms" % (number, delay * 1000), kill_after=delay)
            self.figures["random_kills"] += 1
            self.figures["random_kills_mid_write"] += int(killed["signaled"] and between)
        self.figures["interruptions"] = self.figures["step_kills"] + self.figures["random_kills"]
        self.figures["runtime_s"] = round(time.monotonic() - start, 1)
        return self.figures


def write_args(path, args):
    with open(path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    return str(path)


def blob(tag, size):
    """Text of about size bytes, different for every tag (large enough that writing it takes a while)."""
    line = "%s %s\n" % (tag, "x" * 60)
    return line * (size // len(line))


def managed_files_case(root, work):
    old = {"files": [
        {"path": "%s/etc/a.env" % root, "content": blob("a-old", 64000)},
        {"path": "%s/etc/b.conf" % root, "content": blob("b-old", 32000), "mode": "0600"},
        {"path": "%s/bin/tool" % root, "content": "#!/bin/sh\necho old\n", "mode": "0755"},
        {"path": "%s/etc/same.txt" % root, "content": "unchanged\n"},
        {"path": "%s/etc/gone.sh" % root, "content": "echo gone\n"},
        {"path": "%s/flags/size2-group0.flags" % root, "content": "--device=/dev/dri/renderD128\n"},
        {"path": "%s/flags/size8-group0.flags" % root, "content": "--device=/dev/dri/renderD129\n"},
    ], "links": [
        {"path": "%s/wants/x.service" % root, "src": "/etc/systemd/system/x.service"},
        {"path": "%s/wants/y.service" % root, "src": "/etc/systemd/system/y.service"},
    ]}
    new = {"files": [
        {"path": "%s/etc/a.env" % root, "content": blob("a-new", 64000), "mode": "0640"},
        {"path": "%s/etc/b.conf" % root, "content": blob("b-new", 40000), "mode": "0644",
         "validate": "/usr/bin/test -s %s"},
        {"path": "%s/bin/tool" % root, "content": "#!/bin/sh\necho new\n", "mode": "0700"},
        {"path": "%s/etc/same.txt" % root, "content": "unchanged\n"},
        {"path": "%s/etc/gone.sh" % root, "state": "absent"},
        {"path": "%s/etc/added.env" % root, "content": blob("added", 16000), "mode": "0600"},
        {"path": "%s/flags/size2-group0.flags" % root, "content": "--device=/dev/dri/renderD130\n"},
    ], "links": [
        {"path": "%s/wants/x.service" % root, "src": "/lib/systemd/system/x.service"},
        {"path": "%s/wants/y.service" % root, "state": "absent"},
        {"path": "%s/wants/z.service" % root, "src": "/etc/systemd/system/z.service"},
    ], "prune": [{"path": "%s/flags" % root, "pattern": "*.flags"}]}
    return {}, write_args(work / "old.json", old), write_args(work / "new.json", new), None


def launch_templates_case(root, work, topology):
    with open(WRAPPER) as handle:
        wrapper = handle.read()
    # site variables in every env file and the table: files large enough for random kills to land mid-write
    site = {"SITE_VAR_%03d" % i: "/opt/site/%03d/%s" % (i, "lib" * 60) for i in range(150)}
    common = {"topology": topology, "dest": "%s/launch" % root, "wrapper_path": "%s/bin/topotune-bind" % root,
              "dev_dir": "%s/dev" % root, "node_name": "node1", "extra_env": site}
    # the first run without the wrapper: the second installs it (a new 0755 file) and changes every other file
    old = dict(common, sizes=[4, 8], header="old header")
    new = dict(common, sizes=[4], wrapper_content=wrapper, header="new header", cpu_binding="l3")
    return {}, write_args(work / "old.json", old), write_args(work / "new.json", new), None


def docker_daemon_config_case(root, work):
    # the user's daemon.json, large enough for a writing window; topotune owns only the settings' keys
    user = {"log-driver": "journald", "registry-mirrors": ["https://mirror%d.example" % i for i in range(2000)]}
    initial = {"docker/daemon.json": ("file", json.dumps(user).encode(), 0o644, os.geteuid(), os.getegid())}
    old = {"path": "%s/docker/daemon.json" % root, "backup": False,
           "settings": {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}}}
    new = {"path": "%s/docker/daemon.json" % root, "mode": "0640", "validate": "/usr/bin/test -s %s",
           "settings": {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": 65536, "Hard": -1}},
                        "default-shm-size": "1G"}}
    return initial, write_args(work / "old.json", old), write_args(work / "new.json", new), "docker/daemon.json"


@pytest.mark.parametrize("writer", ["managed_files", "launch_templates", "docker_daemon_config"])
def test_a_killed_writer_leaves_old_or_new_files_and_the_next_run_converges(runner, tmp_path, sim_model, capsys, writer):
    root = str(tmp_path / "root")
    if writer == "managed_files":
        initial, old, new, backup_of = managed_files_case(root, tmp_path)
    elif writer == "launch_templates":
        initial, old, new, backup_of = launch_templates_case(root, tmp_path, sim_model("mi300x-8gpu-spx"))
    else:
        initial, old, new, backup_of = docker_daemon_config_case(root, tmp_path)
    drill = Drill(runner, writer, root, old, new, backup_of)
    figures = drill.drill(initial, seed=writer)
    with capsys.disabled():
        print("\ninterrupted writes: %s: %d interruptions (%d at every write step, %d random kills, %d of them mid-write);"
              " partial files %d, temp files left by the kills %d (removed by the next run), leftover temps %d,"
              " second runs changed %d; %.1f s"
              % (writer, figures["interruptions"], figures["step_kills"], figures["random_kills"],
                 figures["random_kills_mid_write"], figures["partial_files"], figures["temps_left_by_kills"],
                 figures["leftover_temps"], figures["second_run_changed"], figures["runtime_s"]))
    assert not drill.problems, "\n".join(drill.problems[:20])
    assert figures["interruptions"] >= MIN_INTERRUPTIONS
    assert figures["partial_files"] == 0 and figures["leftover_temps"] == 0
