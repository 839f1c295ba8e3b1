"""Which folders may be read at all: never `/`, pmd's own data or a pseudo file system.

The rule for everybody, below the services: creating a collection asks it
(`indexing.services.collections.collection_root_check`), the scanner asks it again before
every scan, and the watcher before watching a folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings

# File systems whose "files" are the kernel's view of processes and devices: /proc/<pid>/root
# alone leads back to the whole machine, /proc/<pid>/environ holds other programs' secrets.
PSEUDO_FILE_SYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "securityfs",
        "debugfs",
        "tracefs",
        "configfs",
        "fusectl",
        "mqueue",
        "bpf",
        "pstore",
        "efivarfs",
        "binfmt_misc",
        "autofs",
        "rpc_pipefs",
        "nsfs",
        "hugetlbfs",
        "selinuxfs",
    }
)
PSEUDO_PREFIXES = (Path("/proc"), Path("/sys"), Path("/dev"))  # where /proc/mounts cannot be read


def _unescape_mount(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_types() -> list[tuple[Path, str]]:
    """(mount point, file system type) of every mount this process sees; empty without /proc."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3:
            mounts.append((Path(_unescape_mount(fields[1])), fields[2]))
    return mounts


def pseudo_mount_points(mounts: list[tuple[Path, str]] | None = None) -> set[str]:
    """Mount points of pseudo file systems, for a walk that must not descend into them."""
    found = {str(point) for point, kind in (mount_types() if mounts is None else mounts) if kind in PSEUDO_FILE_SYSTEMS}
    return found | {str(p) for p in PSEUDO_PREFIXES}


def _file_system_type(path: Path, mounts: list[tuple[Path, str]]) -> str | None:
    """The type of the file system `path` lies on: its deepest mount point wins (the last one mounted)."""
    best: tuple[int, str] | None = None
    for point, kind in mounts:
        if point == path or point in path.parents:
            depth = len(point.parts)
            if best is None or depth >= best[0]:
                best = (depth, kind)
    return best[1] if best else None


def is_within(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies inside it (both resolved)."""
    return path == folder or folder in path.parents


def collection_folder_refusal(root: Path) -> str | None:
    """Why no one may index this resolved folder (`/`, pmd's own data, a pseudo file system), or None.

    The rule for everybody, the local CLI included; the scanner asks it again before every
    scan, so a collection stored before the rule existed is not read either.
    """
    if root == Path(root.anchor):
        return f"{root} is the root of the file system: choose the folder that holds your notes"
    home = Path(os.path.realpath(settings.PMD_HOME))
    if is_within(root, home):
        return f"{root} is inside pmd's own data folder (PMD_HOME={home}): not a collection"
    if is_within(home, root):
        return f"{root} contains pmd's own data folder (PMD_HOME={home}): choose a folder without it"
    kind = _file_system_type(root, mount_types())
    if kind in PSEUDO_FILE_SYSTEMS or any(is_within(root, prefix) for prefix in PSEUDO_PREFIXES):
        return f"{root} is on a pseudo file system ({kind or root.parts[1]}), not a folder of notes"
    return None
