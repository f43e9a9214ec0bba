"""megatron-core's `jit_fuser` compiles on first call, with the same `torch.compile` and options;
importing the project's models no longer imports TorchDynamo (foundation.process.megatron_jit)."""

from __future__ import annotations

import subprocess
import sys

import torch

from foundation.process.megatron_jit import deferred


def test_the_compile_runs_on_the_first_call_once_with_the_options():
    calls = []

    def compile_fn(fn, **options):
        calls.append(options)
        return lambda *a, **k: ("compiled", fn(*a, **k))

    @deferred(compile_fn)
    def double(x):
        """Doubles."""
        return 2 * x

    @deferred(compile_fn)(mode="max-autotune")
    def triple(x):
        return 3 * x

    assert calls == []  # decorating compiles nothing
    assert double(2) == ("compiled", 4) and double(3) == ("compiled", 6)
    assert triple(1) == ("compiled", 3)
    assert calls == [{}, {"mode": "max-autotune"}]  # once each, with its options
    assert double.__doc__ == "Doubles." and double.__name__ == "double"


def test_a_deferred_torch_compile_gives_the_same_values_and_gradients():
    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))

    lazy = deferred(torch.compile)(backend="eager")(gelu)
    x = torch.randn(5, requires_grad=True)
    lazy(x).sum().backward()
    assert torch.equal(lazy(x.detach()), gelu(x.detach()))
    assert torch.equal(x.grad, torch.func.grad(lambda t: gelu(t).sum())(x.detach()))


def test_importing_the_models_leaves_dynamo_out_and_megatron_fusers_deferred():
    code = (
        "import sys, torch\n"
        "import models.build, jobs.loop.trainer, data_prep.access\n"
        "assert 'torch._dynamo' not in sys.modules, 'dynamo imported'\n"
        "import megatron.core.jit as jit\n"
        "assert jit.jit_fuser.deferred_from is torch.compile, jit.jit_fuser\n"
        "from megatron.core.transformer.utils import gelu_impl\n"
        "assert gelu_impl.__wrapped__.__module__ == 'megatron.core.transformer.utils'\n"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
