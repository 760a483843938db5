"""The reader's notebook. `make test` checks what `make lab` configures without starting
it: the contents manager of the Makefile's LAB_FLAGS opens a MyST chapter as a notebook for
the `python3` kernel, and that kernel is this virtualenv's interpreter (nbval runs every
chapter's cells in it). The slow tier starts the server itself: on localhost with token
auth it opens the chapter through its REST API and runs its first cells in the kernel.

The server gets a random token, a free port, temporary runtime, config and data
folders, `--no-browser`, and the Makefile's own LAB_FLAGS (so the test checks what a
reader starts). It is shut down whatever happens.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from llamanat_core.paths import ROOT

CHAPTER = "sweep"  # any chapter: the first cells are the same plumbing in every one
FIRST_CELLS = 4  # parameters, their check, the imports, the first cell that computes
START_TIMEOUT = 90.0
CELL_TIMEOUT = 120.0


def lab_flags() -> list[str]:
    """LAB_FLAGS of the Makefile, with $(CURDIR) resolved."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^LAB_FLAGS = ((?:.*\\\n)*.*)$", text, re.M)
    assert m, "the Makefile has no LAB_FLAGS for `make lab`"
    return m.group(1).replace("\\\n", " ").replace("$(CURDIR)", str(ROOT)).split()


def test_the_labs_contents_manager_opens_a_myst_chapter_as_a_notebook():
    """LAB_FLAGS' contents manager, in this process: chapters/NAME.md is a notebook whose
    first code cell holds the parameters, for the python3 kernel, which runs this
    virtualenv's interpreter; a file it cannot read as a notebook stays a file."""
    import importlib

    from jupyter_client.kernelspec import KernelSpecManager

    flags = dict(f.removeprefix("--").split("=", 1) for f in lab_flags())
    module, _, name = flags["ServerApp.contents_manager_class"].rpartition(".")
    manager = getattr(importlib.import_module(module), name)(root_dir=flags["ServerApp.root_dir"])
    model = manager.get(f"chapters/{CHAPTER}.md")
    assert model["type"] == "notebook", f"chapters/{CHAPTER}.md opened as {model['type']!r}"
    code = [c for c in model["content"]["cells"] if c["cell_type"] == "code"]
    assert "parameters" in code[0]["metadata"].get("tags", [])
    assert model["content"]["metadata"]["kernelspec"]["name"] == "python3"
    assert manager.get("Makefile")["type"] == "file"  # the check can fail
    # the kernel's interpreter: this one, or a bare `python`, which jupyter_client starts as
    # the server's own (`make lab` starts this virtualenv's)
    kernel = KernelSpecManager().get_kernel_spec("python3").argv[0]
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    assert kernel in bare or Path(kernel).resolve() == Path(sys.executable).resolve(), kernel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp: Path):
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR"):
            (tmp / name).mkdir()
            env[name] = str(tmp / name)
        self.log = open(tmp / "server.log", "wb")
        jupyter = Path(sys.executable).with_name("jupyter")
        self.proc = subprocess.Popen(
            [str(jupyter), "server", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             *lab_flags(), *(["--allow-root"] if os.geteuid() == 0 else [])],  # CI runs as root
            env=env, cwd=str(tmp), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.tmp = tmp

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 30.0):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method, headers={
            "Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"jupyter server exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                if self.request("GET", "/api/status", timeout=5)[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        pytest.fail(f"jupyter server did not answer in {START_TIMEOUT} s:\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.tmp / "server.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.request("POST", "/api/shutdown", timeout=10)
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
                self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            self.log.close()


# The server's round trip is the slow tier's: a Jupyter server and a kernel running the
# first cells take ~20 s, and what they check is checked above and by nbval.
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module's tests (a start costs a few seconds)."""
    tmp = tmp_path_factory.mktemp("lab")
    srv = Server(tmp)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(tmp / "JUPYTER_RUNTIME_DIR", ignore_errors=True)


@pytest.mark.notebook
@pytest.mark.slow
def test_the_server_refuses_requests_without_the_token(server):
    req = urllib.request.Request(f"{server.base}/api/contents/chapters")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code in (401, 403)


def execute(ws, session: str, code: str) -> dict:
    """Send one execute_request over the kernel websocket; return its execute_reply content
    (and collect any error output on the way)."""
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "username": "test", "session": session, "msg_type": "execute_request",
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    errors, reply, idle = [], None, False
    deadline = time.monotonic() + CELL_TIMEOUT
    while not (reply and idle):
        ws.settimeout(max(0.1, deadline - time.monotonic()))
        msg = json.loads(ws.recv())
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = msg["header"]["msg_type"]
        if kind == "error":
            errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
        elif kind == "execute_reply":
            reply = msg["content"]
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
        if time.monotonic() > deadline:
            raise TimeoutError(f"no reply to {code[:60]!r} in {CELL_TIMEOUT} s")
    reply["errors"] = errors
    return reply


@pytest.mark.notebook
@pytest.mark.slow
def test_a_myst_chapter_opens_as_a_notebook_and_its_first_cells_run(server):
    import websocket

    status, model = server.request("GET", f"/api/contents/chapters/{CHAPTER}.md")
    assert status == 200
    assert model["type"] == "notebook", f"chapters/{CHAPTER}.md opened as {model['type']!r}"
    cells = model["content"]["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert "parameters" in code[0]["metadata"].get("tags", [])
    assert model["content"]["metadata"]["kernelspec"]["name"] == "python3"

    status, session = server.request("POST", "/api/sessions", {
        "path": f"chapters/{CHAPTER}.md", "type": "notebook", "name": f"{CHAPTER}.md",
        "kernel": {"name": "python3"}})
    assert status == 201
    kernel = session["kernel"]["id"]
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{server.port}/api/kernels/{kernel}/channels?token={server.token}",
        timeout=CELL_TIMEOUT, suppress_origin=True)
    try:
        client = uuid.uuid4().hex
        for i, cell in enumerate(code[:FIRST_CELLS]):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            reply = execute(ws, client, source)
            assert reply["status"] == "ok" and not reply["errors"], (
                f"cell {i} of chapters/{CHAPTER}.md failed in the Lab kernel: {reply['errors']}")
        # the project's kernel: this virtualenv's interpreter, with the package importable
        reply = execute(ws, client, "import sys, llamanat_core; print(sys.prefix)")
        assert reply["status"] == "ok", reply
        # the chapter's own parameters went through the check: committed seeds, no budget change
        reply = execute(ws, client, "assert isinstance(seeds, tuple) and steps is None and fresh is False")
        assert reply["status"] == "ok" and not reply["errors"], reply["errors"]
    finally:
        ws.close()
        server.request("DELETE", f"/api/sessions/{session['id']}")
