"""A Debian machine in a temporary folder, for the tests of `make`'s set-up scripts
(tools/ensure_chromium.sh, tools/ensure_corpus.sh): a PATH of real tools (bash, the core
utilities, dpkg-deb) plus an `apt-get` backed by a folder of packages, and an `id` that
says whether the user is root. The scripts run unchanged against it; the tests look at what
they leave behind (files installed or written, the exit code, the one-line error).

The `apt-get` keeps apt's rules that the scripts depend on: the package lists start empty
and only `apt-get update` fills them, which takes root; `install -y NAME` puts the files of
package NAME on the PATH (root, lists filled; without `-y` there is no terminal to say yes,
so it aborts); `download NAME=VERSION` puts the archive `NAME_VERSION_all.deb` in the
current folder (lists filled; any user). An unknown package is apt's error and exit 100.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# what the scripts and this apt-get call, taken from the machine running the tests
REAL_TOOLS = ("bash", "sh", "cat", "cp", "chmod", "dirname", "ls", "mkdir", "mktemp", "rm",
              "touch", "tar", "gzip", "xz", "zstd")

APT_GET = r"""#!{bash}
set -u
lists={lists}; archive={archive}; bin={bin}
need_root() {{
  [ "$(id -u)" = 0 ] || {{ echo "E: Could not open lock file - open (13: Permission denied)" >&2; exit 100; }}
}}
need_lists() {{ [ -e "$lists" ] || {{ echo "E: Unable to locate package $1" >&2; exit 100; }}; }}
command=$1; shift
case "$command" in
  update) need_root; touch "$lists" ;;
  install)
    need_root; yes=0; names=()
    for a in "$@"; do case "$a" in -y) yes=1 ;; -*) ;; *) names+=("$a") ;; esac; done
    for n in "${{names[@]}}"; do
      need_lists "$n"; [ -d "$archive/$n" ] || {{ echo "E: Unable to locate package $n" >&2; exit 100; }}
    done
    [ "$yes" = 1 ] || {{ echo "Do you want to continue? [Y/n] Abort." >&2; exit 1; }}
    for n in "${{names[@]}}"; do cp -r "$archive/$n"/. "$bin"/; done ;;
  download)
    for a in "$@"; do
      case "$a" in -*) continue ;; esac
      deb="$archive/${{a%%=*}}_${{a#*=}}_all.deb"
      need_lists "$a"
      [ -e "$deb" ] || {{ echo "E: Can't find a source to download version of '$a'" >&2; exit 100; }}
      cp "$deb" .
    done ;;
  *) echo "E: Invalid operation $command" >&2; exit 100 ;;
esac
"""


@dataclass
class Machine:
    """The temporary machine: `bin` is its whole PATH, `archive` what apt can install."""
    root: Path
    bin: Path = field(init=False)
    archive: Path = field(init=False)
    lists: Path = field(init=False)

    def __post_init__(self):
        self.bin, self.archive, self.lists = self.root / "bin", self.root / "archive", self.root / "lists"
        self.bin.mkdir(parents=True)
        self.archive.mkdir()

    def real(self, *names: str) -> Machine:
        """Put the machine's own `names` on the PATH (those it has)."""
        for name in names:
            found = shutil.which(name)
            if found and not (self.bin / name).exists():
                os.symlink(found, self.bin / name)
        return self

    def script(self, name: str, body: str) -> Machine:
        (self.bin / name).write_text(body)
        (self.bin / name).chmod(0o755)
        return self

    def user(self, uid: int) -> Machine:
        return self.script("id", f'#!{shutil.which("sh")}\n[ "$1" = -u ] && echo {uid}\n')

    def with_apt(self, lists_filled: bool = False) -> Machine:
        self.script("apt-get", APT_GET.format(bash=shutil.which("bash"), lists=self.lists,
                                              archive=self.archive, bin=self.bin))
        if lists_filled:
            self.lists.touch()
        return self

    def package(self, name: str, files: dict[str, str]) -> Machine:
        """A package `install` can put on the PATH: executables by name and body."""
        folder = self.archive / name
        folder.mkdir()
        for file, body in files.items():
            (folder / file).write_text(body)
            (folder / file).chmod(0o755)
        return self

    def deb(self, deb: Path) -> Machine:
        """An archive `download` can fetch (named NAME_VERSION_all.deb)."""
        shutil.copy(deb, self.archive / deb.name)
        return self

    def has(self, name: str) -> bool:
        return (self.bin / name).exists()

    def run(self, script: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([shutil.which("bash"), str(script), *args],
                              env={"PATH": str(self.bin), **(env or {})},
                              capture_output=True, text=True, timeout=600, cwd=self.root)


def machine(tmp_path: Path, uid: int) -> Machine:
    """A machine of the core tools alone, on which the user is `uid` (0: root)."""
    return Machine(tmp_path / "machine").real(*REAL_TOOLS).user(uid)


def build_deb(root: Path, name: str, version: str, files: dict[str, bytes], out_dir: Path) -> Path:
    """A real Debian archive NAME_VERSION_all.deb holding `files` (path in the package ->
    bytes), built by dpkg-deb."""
    tree = root / f"{name}-tree"
    for path, data in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_bytes(data)
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: tests <t@example.org>\n"
        f"Description: a package built by the tests\n")
    out = out_dir / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(tree), str(out)],
                   check=True, capture_output=True)
    return out
