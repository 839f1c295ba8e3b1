"""The one way pmd runs git: nothing a repository's own configuration names is ever run.

pmd reads and pulls folders that other people can write into, often as a more privileged user
than theirs. A `.git/config` (or a file it includes) can name programs git would otherwise run:
hooks, a file-system monitor, a pager, gpg for signatures, external diff and textconv drivers,
clean/smudge filters, credential helpers, an ssh command, a proxy command, the remote's
upload-pack. Every git that pmd starts goes through `git_run` / `git_popen`, which

- pass fixed `-c` overrides for the single-valued keys (hooks, fsmonitor, pager, gpg, askpass,
  ssh, upload-pack, protocols: only file, git, http(s) and ssh, never `ext::`),
- read the repository's own keys (`git config --list`, which runs nothing) and override every
  key found that names a command (`filter.<name>.smudge`, `diff.<name>.textconv`,
  `credential.<url>.helper`, `remote.<name>.uploadpack`, ...), whatever its name,
- run with a clean environment: no inherited GIT_* variables, no terminal prompt, no askpass,
  a fixed ssh command and no proxy command,
- start git in its own process group and kill the whole group on a timeout, so nothing it
  started (upload-pack, ssh, a helper) is left running.

Callers add the command's own switches (`--no-show-signature`, `--no-ext-diff`, `--no-textconv`,
`--upload-pack=git-upload-pack`): see `indexing/services/history.py` and `collection_git_pull`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

DEFAULT_TIMEOUT = 600.0

# Single-valued keys: the last value wins and command-line values are read last.
_FIXED = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.pager": "cat",
    "core.editor": "false",
    "core.askPass": "",
    "core.sshCommand": "ssh",
    "core.alternateRefsCommand": "",
    "sequence.editor": "false",
    "credential.helper": "",  # the empty value empties the list of helpers
    "diff.external": "",
    "log.showSignature": "false",
    "gpg.program": "gpg",
    "gpg.openpgp.program": "gpg",
    "gpg.x509.program": "gpgsm",
    "gpg.ssh.program": "ssh-keygen",
    "gpg.ssh.defaultKeyCommand": "",
    "submodule.recurse": "false",
    # nothing left running after a pull (a detached `gc --auto` leaves git's process group) and
    # no file written where the configuration says (a cookie jar anywhere, as root)
    "gc.auto": "0",
    "gc.autoDetach": "false",
    "maintenance.auto": "false",
    "http.saveCookies": "false",
    "protocol.allow": "never",
    "protocol.file.allow": "always",
    "protocol.git.allow": "always",
    "protocol.http.allow": "always",
    "protocol.https.allow": "always",
    "protocol.ssh.allow": "always",
    "protocol.ext.allow": "never",
}

# Keys of the repository's own configuration that name a program, whatever their <name>/<url>
# part; each one found gets the override on the right (None: an empty value).
_COMMAND_KEYS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"^filter\..+\.(clean|smudge|process)$"), None),
    (re.compile(r"^filter\..+\.required$"), "false"),
    (re.compile(r"^diff\..+\.(command|textconv)$"), None),
    (re.compile(r"^merge\..+\.driver$"), None),
    (re.compile(r"^(diff|merge)tool\..+\.cmd$"), "false"),
    (re.compile(r"^credential\..+\.helper$"), None),
    (re.compile(r"^remote\..+\.uploadpack$"), "git-upload-pack"),
    (re.compile(r"^remote\..+\.receivepack$"), "git-receive-pack"),
    (re.compile(r"^remote\..+\.vcs$"), None),
    (re.compile(r"^gpg\..+\.program$"), "false"),
    (re.compile(r"^pager\..+$"), "false"),
    (re.compile(r"^submodule\..+\.update$"), "none"),
    (re.compile(r"^http\..+\.savecookies$"), "false"),
]

# The environment git gets: the caller's without GIT_* (no GIT_DIR, GIT_SSH, GIT_ASKPASS, ...)
# and without SSH_ASKPASS; an empty GIT_ASKPASS / GIT_PROXY_COMMAND win over the config's.
_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_PROXY_COMMAND": "",
    "GIT_SSH_COMMAND": "ssh",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "false",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
}


class GitTimedOut(subprocess.TimeoutExpired):
    """git ran past its timeout; it and everything it started were killed."""


def git_env(config: list[tuple[str, str]] | None = None) -> dict[str, str]:
    """The environment without the caller's GIT_*; `config` as GIT_CONFIG_KEY_n / VALUE_n, which
    (unlike `-c key=value`) carry any key, one with `=` in its <name> part too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "SSH_ASKPASS"}
    env.update(_ENV)
    for n, (key, value) in enumerate(config or []):
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = key, value
    if config:
        env["GIT_CONFIG_COUNT"] = str(len(config))
    return env


def _overrides(pairs) -> list[str]:
    out: list[str] = []
    for key, value in pairs:
        out += ["-c", f"{key}={value}"]
    return out


def repository_command_keys(root: str) -> list[tuple[str, str]]:
    """(key, safe value) for every key of `root`'s repository configuration that names a program.

    `git config --list` only reads files. Keys of every scope are listed, includes followed;
    the overrides also cover the user's own global keys, which costs nothing pmd needs. A
    configuration git cannot read lists nothing, and the command itself then stops on it."""
    listed = subprocess.run(
        ["git", *_overrides(_FIXED.items()), "-C", root, "config", "--includes", "--null", "--name-only", "--list"],
        capture_output=True,
        env=git_env(),
        timeout=60,
        start_new_session=True,
    )
    found: dict[str, str] = {}
    for raw in listed.stdout.split(b"\x00"):
        key = raw.decode("utf-8", "surrogateescape").strip()
        if not key:
            continue
        # sections and names are case-insensitive, the <name> part is not: match on a lower copy
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        lowered = f"{section.lower()}.{subsection}.{name.lower()}" if subsection else key.lower()
        for pattern, value in _COMMAND_KEYS:
            if pattern.match(lowered):
                found[key] = "" if value is None else value
                break
    return list(found.items())


def git_command(root: str, *args: str) -> list[str]:
    """The argv to run `git args` in `root` with the fixed overrides (the repository's own
    command keys go in the environment: `git_env(repository_command_keys(root))`)."""
    return ["git", *_overrides(_FIXED.items()), "-C", root, *args]


def kill_group(process: subprocess.Popen) -> None:
    """Kill git and everything it started (it leads its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.kill()
    except ProcessLookupError:
        pass


def git_popen(root: str, *args: str, **popen) -> subprocess.Popen:
    """Start git (see the module docstring); the caller reads it and calls `kill_group` when done early."""
    return subprocess.Popen(
        git_command(root, *args), env=git_env(repository_command_keys(root)), start_new_session=True, **popen
    )


def git_run(
    root: str, *args: str, stdin: bytes | None = None, timeout: float | None = DEFAULT_TIMEOUT, text: bool = False
) -> subprocess.CompletedProcess:
    """Run git to the end (see the module docstring); on `timeout` its whole process group is
    killed and GitTimedOut raised."""
    process = git_popen(
        root,
        *args,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.communicate()
        raise GitTimedOut(process.args, timeout) from None
    except BaseException:
        kill_group(process)
        process.wait()
        raise
    finally:
        if process.returncode is not None:
            # git is gone; anything it left in its group (a daemonised helper) goes too
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if text:
        return subprocess.CompletedProcess(
            process.args, process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        )
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
