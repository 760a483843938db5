"""The repository's front door: the README's picture is what the code draws, and `make
test`'s Chromium step installs the browser as root and otherwise stops with the command
to run."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from llamanat_core import diagram

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "artifacts" / "figures" / "decoder.png"
ENSURE_CHROMIUM = ROOT / "tools" / "ensure_chromium.sh"


def test_the_readme_picture_is_what_the_code_draws():
    """`make book` (make figures) writes it; an edit of the diagram or the reference
    Config that was not followed by `make figures` fails here."""
    assert PICTURE.read_bytes() == diagram.diagram_png(), (
        "artifacts/figures/decoder.png is stale: run `make figures` and commit it")


# ------------------------------------------------------------------ make test's Chromium step

def _fake_bin(tmp_path: Path, uid: int, apt_installs: bool = False, chromium: bool = False) -> Path:
    """A PATH of one folder: an `id` that reports `uid`, an `apt-get` that logs its
    arguments (and with `apt_installs` puts a `chromium` on the PATH), and no browser
    unless `chromium`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, chmod = tmp_path / "apt.log", shutil.which("chmod")
    scripts = {
        "id": f'#!/bin/sh\n[ "$1" = -u ] && echo {uid}\n',
        "apt-get": f'#!/bin/sh\necho "DEBIAN_FRONTEND=$DEBIAN_FRONTEND $*" >> {log}\n'
                   + (f"printf '#!/bin/sh\\n' > {bin_dir}/chromium; {chmod} +x {bin_dir}/chromium\n"
                      if apt_installs else ""),
    }
    if chromium:
        scripts["chromium"] = "#!/bin/sh\n"
    for name, body in scripts.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _ensure_chromium(bin_dir: Path):
    return subprocess.run([shutil.which("bash"), str(ENSURE_CHROMIUM)], env={"PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=30)


def test_without_chromium_a_user_is_told_the_command_at_once(tmp_path):
    result = _ensure_chromium(_fake_bin(tmp_path, uid=1000))
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "apt-get install -y -qq chromium" in line and "sudo" in line
    assert not (tmp_path / "apt.log").exists()  # nothing attempted


def test_without_chromium_root_installs_debians_package(tmp_path):
    result = _ensure_chromium(_fake_bin(tmp_path, uid=0, apt_installs=True))
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls == ["DEBIAN_FRONTEND= update -qq",
                     "DEBIAN_FRONTEND=noninteractive install -y -qq chromium"]


def test_an_install_that_brings_no_chromium_fails(tmp_path):
    result = _ensure_chromium(_fake_bin(tmp_path, uid=0, apt_installs=False))
    assert result.returncode == 1 and "no chromium" in result.stderr.splitlines()[-1]


def test_with_chromium_nothing_is_done(tmp_path):
    result = _ensure_chromium(_fake_bin(tmp_path, uid=0, chromium=True))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not (tmp_path / "apt.log").exists()
