"""``koe serve`` with the scripted fake engine in place of the model, as its own process.

The command line is ``koe``'s own (``python -m support.fake_serve serve --port N``, tests/ on
``PYTHONPATH``): the CLI, its logging, uvicorn's signal handling and graceful shutdown are the real ones;
only the loaded model is the fake, each engine call slowed by ``KOE_FAKE_DELAY_S`` seconds so work is
still in flight when a signal arrives; for ``koe wyoming``, it has loaded ``KOE_FAKE_LOAD_S`` seconds after
the start (at once by default), where a test needs the wait for the model to be seen. With
:data:`IMPORT_LOG_VARIABLE` set, the process appends the name of every module it imports to that file as it
imports it (polled), so a test can see what a request imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import koe.app
import koe.server.runtime
from koe.cli import main
from koe.pipeline.speech import Speech
from live_checks import wait_serving
from live_server import LOOPBACK, loopback_socket
from support.fake import FakeEngine, fake_speech

#: The environment variable with each fake engine call's delay in seconds.
DELAY_VARIABLE = "KOE_FAKE_DELAY_S"
#: The environment variable with how many seconds after the start the fake model has loaded.
LOAD_VARIABLE = "KOE_FAKE_LOAD_S"
#: The environment variable naming the file the process lists its imports in, one module a line.
IMPORT_LOG_VARIABLE = "FAKE_SERVE_IMPORT_LOG"
#: How often the import log looks for new modules.
_IMPORT_POLL_S = 0.02


@contextmanager
def fake_serve_process(
    log: Path,
    *,
    delay_s: float = 0.0,
    settings: Mapping[str, str] | None = None,
    log_level: str = "INFO",
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``koe serve`` on the fake engine in its own process, ready on /ping, its output in ``log``, with
    ``KOE_*`` ``settings``; yields it and its URL, and kills it if it is still running at the end."""
    with loopback_socket() as probe:
        port = probe.getsockname()[1]
    tests = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        **(settings or {}),
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        DELAY_VARIABLE: str(delay_s),
    }
    command = [sys.executable, "-m", "support.fake_serve", "--log-level", log_level]
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*command, "serve", "--host", LOOPBACK, "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://{LOOPBACK}:{port}"
    try:
        wait_serving(url + "/ping", server, log)
        yield server, url
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _log_imports(path: Path) -> None:
    """Append each module imported from now on to ``path``, one name a line, until the process ends."""
    seen = set(sys.modules)
    with path.open("a", buffering=1) as log:
        while True:
            time.sleep(_IMPORT_POLL_S)
            new = set(sys.modules) - seen
            seen |= new
            log.writelines(f"{name}\n" for name in sorted(new))


def _loaded(speech: Speech, after_s: float) -> Future[Speech]:
    """``speech``, loaded ``after_s`` seconds from now (at once for 0)."""
    loaded: Future[Speech] = Future()
    if after_s:
        timer = threading.Timer(after_s, loaded.set_result, [speech])
        timer.daemon = True
        timer.start()
    else:
        loaded.set_result(speech)
    return loaded


if __name__ == "__main__":
    if IMPORT_LOG_VARIABLE in os.environ:
        path = Path(os.environ[IMPORT_LOG_VARIABLE])
        threading.Thread(target=_log_imports, args=(path,), daemon=True, name="import-log").start()
    create_app = koe.app.create_app
    speech = fake_speech(FakeEngine(delay_s=float(os.environ.get(DELAY_VARIABLE, "0"))))
    # handed in as a test's model is (timed afresh at every start), and no real model loads beside it
    koe.app.create_app = lambda settings=None, _=None, llm=None, loading=None: create_app(
        settings, speech, llm
    )
    load_s = float(os.environ.get(LOAD_VARIABLE, "0"))
    koe.server.runtime.load_in_background = lambda settings: _loaded(speech, load_s)
    sys.exit(main())
