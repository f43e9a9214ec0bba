"""The suite. A test module may import megatron-core before any of the project's packages, so
the suite defers megatron's fused-kernel compiles as those packages do
(foundation.process.megatron_jit)."""

from foundation.process.megatron_jit import defer_megatron_compile

defer_megatron_compile()
