"""``koe serve`` with the scripted fake engine in place of the model, as its own process.

The command line is ``koe``'s own (``python -m support.fake_serve serve --port N``, tests/ on
``PYTHONPATH``): the CLI, its logging, uvicorn's signal handling and graceful shutdown are the real ones;
only the loaded model is the fake, each engine call slowed by ``KOE_FAKE_DELAY_S`` seconds so work is
still in flight when a signal arrives.
"""

from __future__ import annotations

import os
import sys

import koe.app
from koe.cli import main
from support.fake import FakeEngine, fake_speech

#: The environment variable with each fake engine call's delay in seconds.
DELAY_VARIABLE = "KOE_FAKE_DELAY_S"

if __name__ == "__main__":
    create_app = koe.app.create_app
    speech = fake_speech(FakeEngine(delay_s=float(os.environ.get(DELAY_VARIABLE, "0"))))
    koe.app.create_app = lambda settings=None, _=None, llm=None: create_app(settings, speech, llm)
    sys.exit(main())
