"""Domain aliases shared across packages."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Mono float32 samples in [-1, 1].
Audio = npt.NDArray[np.float32]
#: A voice's style table: float32, shape (510, 1, 256); row ``n - 1`` styles an utterance of n tokens.
StyleTable = npt.NDArray[np.float32]

#: Kokoro's native output rate.
SAMPLE_RATE = 24_000
