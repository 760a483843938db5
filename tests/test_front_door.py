"""The repository's front door: the README's picture is what the code draws, the README
and CONTRIBUTING stay short and their links resolve, CONTRIBUTING maps every module, and
`make test`'s Chromium step installs the browser as root and otherwise stops with the
command to run."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llamanat_core import diagram

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "artifacts" / "figures" / "decoder.png"
ENSURE_CHROMIUM = ROOT / "tools" / "ensure_chromium.sh"
DOCS = ("README.md", "CONTRIBUTING.md", "benchmarks/README.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_picture_is_what_the_code_draws():
    """`make book` (make figures) writes it; an edit of the diagram or the reference
    Config that was not followed by `make figures` fails here."""
    assert PICTURE.read_bytes() == diagram.diagram_png(), (
        "artifacts/figures/decoder.png is stale: run `make figures` and commit it")
    assert "](artifacts/figures/decoder.png)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", DOCS)
def test_relative_links_resolve(name):
    path = ROOT / name
    targets = [t for t in LINK.findall(path.read_text()) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if not (path.parent / t.split("#")[0]).exists()]
    assert not missing, f"{name} links to files that do not exist: {missing}"


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    setup = text.split("## Set-up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in setup.strip().splitlines()]
    assert commands == ["make book", "make test"]


def _modules() -> list[str]:
    package = ROOT / "llamanat_core"
    return sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                  if p.name != "__init__.py" and p.name != "__main__.py")


def _mapped(module: str, text: str) -> bool:
    """`x.py` is mapped as `x.py` or, once it has become a package, `x/`; `pkg/x.py` as
    `pkg/` with `x.py` named."""
    *package, name = module.split("/")
    if package:
        return f"`{package[0]}/`" in text and f"`{name}`" in text
    return f"`{name}`" in text or f"`{name.removesuffix('.py')}/`" in text


def test_contributing_maps_every_module():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert len(text.splitlines()) <= 150
    modules = _modules()
    assert "study/plan.py" in modules and "probes/rope.py" in modules  # the scan sees subfolders
    missing = [m for m in modules if not _mapped(m, text)]
    assert not missing, f"CONTRIBUTING.md does not map {missing}"
    assert not _mapped("probes/trainer.py", text) and not _mapped("trainer.py", text)


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
    assert "`sudo apt-get update && sudo apt-get install -y chromium`" in line
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
