"""The public surface: names exported, and light to import (analysis imports accounting)."""

from __future__ import annotations

import subprocess
import sys


def test_public_names_and_lazy_heavy_imports():
    code = (
        "import sys, models, models.accounting\n"
        "heavy = [m for m in ('torch', 'megatron') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from models import ModelConfig, ParallelConfig, build_gpt, import_nanogpt, logits\n"
        "assert callable(build_gpt) and callable(import_nanogpt) and callable(logits)\n"
        "assert ParallelConfig(2, 3, 4).world_size == 24\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
