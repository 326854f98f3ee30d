"""Sysroot-aware access to kernel state (sysfs, procfs) for modules and the offline CLI.

Every path that names host state is joined under a *sysroot* (default ``/``), like ``lscpu --sysroot``:
on a real node the sysroot is ``/``, on a simulated node ``/sim``, in tests a ``tmp_path`` tree.

Public API (standard library only, Python 3.8+):

``SysrootError(TopotuneError)``
    A file under the sysroot is missing, unreadable or malformed. ``err.path`` holds the full path.
``join(sysroot, path)``
    ``path`` (absolute or relative) placed under ``sysroot``; refuses ``..`` escapes.
``read_text(path, default=RAISE)``
    File content with surrounding whitespace stripped; ``default`` returned instead of raising when the
    file is missing or unreadable.
``read_int(path, default=RAISE)``
    ``read_text`` parsed as a decimal integer (``0x`` hex accepted); garbage raises ``SysrootError``
    unless ``default`` is given.
``read_properties(path, default=RAISE, raw=False)``
    KFD-style ``key value`` lines as ``{key: int}`` (values that are not integers are kept as ``str`` so
    the caller can report them; ``raw=True`` keeps every value as ``str``, faster for big
    trees). Blank lines are skipped; a line without a value maps to ``""``.
``list_dir(path)``
    Sorted entry names, ``[]`` when the directory is missing.
``numeric_entries(path)``
    Entry names that are decimal integers, as ints in numeric order (KFD ``nodes/``, ``io_links/``).
``amd_gpu_functions(sysroot)``
    Sorted BDFs of the AMD GPU functions in ``sys/bus/pci/devices`` (every CPX/DPX partition's function too).
``real_path(path)`` / ``is_dir(path)``
    ``os.path.realpath`` / ``os.path.isdir``, seen by ``recording``: readers resolve sysfs links and test
    directories with these.
``recording()``
    Context manager yielding a ``Reads`` (``files``, ``dirs``, ``links``: full paths) of everything read through
    this module while it is active: the readers own the paths they read, and the node snapshot
    (``module_utils/topology/snapshot.py``) records a run of them instead of keeping a list of its own.
"""

import os

from .errors import TopotuneError

__all__ = ["AMD_VENDOR", "RAISE", "Reads", "SysrootError", "amd_gpu_functions", "is_dir", "join", "list_dir",
           "numeric_entries", "read_bytes", "read_int", "read_properties", "read_text", "real_path", "recording"]

AMD_VENDOR = "0x1002"
# PCI classes of AMD Instinct GPUs: 0x03xxxx display controllers (MI210 PCIe cards), 0x12xxxx processing
# accelerators (OAM)
GPU_CLASSES = ("0x03", "0x12")

RAISE = object()
_RECORDINGS = []


class Reads:
    """What the readers read while a ``recording`` was active."""

    def __init__(self):
        self.files, self.dirs, self.links = set(), set(), set()


class recording:  # noqa: N801 - used as ``with recording() as reads``, like a function
    """See the module docstring."""

    def __enter__(self):
        self.reads = Reads()
        _RECORDINGS.append(self.reads)
        return self.reads

    def __exit__(self, *exc):
        _RECORDINGS.remove(self.reads)
        return False


def _seen(kind, path):
    for reads in _RECORDINGS:
        getattr(reads, kind).add(path)


class SysrootError(TopotuneError):
    """A file under the sysroot is missing, unreadable or malformed."""

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


def join(sysroot, path):
    """Return ``path`` placed under ``sysroot`` (``/`` leaves it unchanged)."""
    root = sysroot or "/"
    rel = os.path.normpath("/" + str(path).lstrip("/")).lstrip("/")
    if rel.startswith(".."):
        raise SysrootError("path %r escapes the sysroot %r" % (path, root), path)
    if root == "/":
        return "/" + rel
    return os.path.join(root, rel)


def read_text(path, default=RAISE):
    """Return the stripped content of ``path``."""
    try:
        # os.open/os.read: a KFD tree is thousands of tiny files, and this is ~3x faster than open()
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, 65536)
            if len(data) == 65536:
                chunks = [data]
                while data:
                    data = os.read(fd, 65536)
                    chunks.append(data)
                data = b"".join(chunks)
        finally:
            os.close(fd)
        if _RECORDINGS:
            _seen("files", path)
        return data.decode("utf-8", "replace").strip()
    except OSError as err:
        if default is not RAISE:
            return default
        reason = err.strerror or err.__class__.__name__
        raise SysrootError("cannot read %s: %s" % (path, reason), path) from None


def read_bytes(path, limit=4096, default=RAISE):
    """Return up to ``limit`` raw bytes of ``path`` (a PCI ``config`` file: a binary attribute)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks, size = [], 0
            while size < limit:
                data = os.read(fd, limit - size)
                if not data:
                    break
                chunks.append(data)
                size += len(data)
        finally:
            os.close(fd)
        if _RECORDINGS:
            _seen("files", path)
        return b"".join(chunks)
    except OSError as err:
        if default is not RAISE:
            return default
        raise SysrootError("cannot read %s: %s" % (path, err.strerror or err.__class__.__name__), path) from None


def _to_int(text):
    text = text.strip()
    if text.lower().startswith(("0x", "-0x")):
        return int(text, 16)
    return int(text, 10)


def read_int(path, default=RAISE):
    """Return the integer held in ``path``."""
    text = read_text(path, default)
    if text is default and default is not RAISE:
        return default
    try:
        return _to_int(text)
    except ValueError:
        if default is not RAISE:
            return default
        raise SysrootError("%s: expected an integer, found %r" % (path, text[:40]), path) from None


def read_properties(path, default=RAISE, raw=False):
    """Return the ``key value`` lines of a KFD properties file as a dict (``raw``: values as str)."""
    text = read_text(path, default)
    if text is default and default is not RAISE:
        return default
    if raw:
        words = text.split()
        # fast path: every line is exactly "key value"
        if len(words) % 2 == 0 and len(words) == 2 * text.count("\n") + 2:
            return dict(zip(words[::2], words[1::2]))
    props = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if not parts:
            continue
        value = parts[1].strip() if len(parts) > 1 else ""
        if raw:
            props[parts[0]] = value
            continue
        try:
            props[parts[0]] = int(value)
        except ValueError:
            try:
                props[parts[0]] = _to_int(value)
            except ValueError:
                props[parts[0]] = value
    return props


def list_dir(path):
    """Return the sorted entry names of ``path`` (``[]`` when missing)."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    if _RECORDINGS:
        _seen("dirs", path)
    return names


def real_path(path):
    """``os.path.realpath(path)``; a recording keeps the link so a snapshot can lay it out again."""
    if _RECORDINGS and os.path.islink(path):
        _seen("links", path)
    return os.path.realpath(path)


def is_dir(path):
    """``os.path.isdir(path)``; a recording keeps the directory (an empty one means something: IOMMU off)."""
    found = os.path.isdir(path)
    if found and _RECORDINGS:
        _seen("dirs", path)
    return found


def numeric_entries(path):
    """Return the entries of ``path`` named by decimal integers, in numeric order."""
    # isdigit() also accepts characters such as '²' that int() refuses
    return sorted(int(name) for name in list_dir(path) if name.isdigit() and name.isascii())


def amd_gpu_functions(sysroot):
    """Sorted BDFs of the AMD GPU functions under ``sysroot`` (``sys/bus/pci/devices``)."""
    base = join(sysroot, "sys/bus/pci/devices")
    return [bdf for bdf in list_dir(base)
            if read_text(os.path.join(base, bdf, "vendor"), "").lower() == AMD_VENDOR
            and read_text(os.path.join(base, bdf, "class"), "").lower().startswith(GPU_CLASSES)]
