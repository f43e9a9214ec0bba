"""The engines a run can train with: one registered `EngineSpec` per name, with its builder.

As torchtitan registers a `TrainSpec` per model, each engine is registered here once, by name,
with what builds it; `jobs.engines.engine.build_engine` builds the one a config names, and the
configs (`jobs.config.RunConfig.engine`, `scaling.spec.study.StudySpec.engine`) accept exactly the
names registered here (`EngineName`). The builder is named as `(module, class)` and imported only
when built, as megatron-core's `ModuleSpec` names a module lazily: only the chosen engine's
library (DeepSpeed) is loaded, and this module stays at the bottom of `jobs`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EngineSpec", "ENGINE_SPECS", "ENGINE_NAMES", "EngineName", "engine_spec"]


@dataclass(frozen=True)
class EngineSpec:
    """One engine: its name in a config, what builds it, and what it supports."""

    name: str
    builder: tuple[str, str]  # (module, class) called as `cls(config, model, bf16)`
    pipeline_parallel: bool  # trains with parallel.pipeline_parallel > 1
    # shards optimiser state by ZeRO stage (`deepspeed.zero_stage`); such an engine keeps an fp32
    # master copy from stage 1 on and accumulates bf16 gradients in fp32 only with ZeRO
    zero: bool = False

    def zero_stage(self, config: Any) -> int:
        """The ZeRO stage `config` (a run config) trains with: 0 for an engine without ZeRO."""
        return config.deepspeed.zero_stage if self.zero else 0

    def build(self, config: Any, model: Any, bf16: bool) -> Any:
        """The engine wrapping `model` (bf16 params and fp32 gradient accumulation when `bf16`)."""
        module, name = self.builder
        return getattr(importlib.import_module(module), name)(config, model, bf16)


ENGINE_SPECS: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec("megatron", ("jobs.engines.engine_megatron", "MegatronEngine"), True),
        EngineSpec(
            "deepspeed", ("jobs.engines.engine_deepspeed", "DeepSpeedEngine"), False, zero=True
        ),
    )
}
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINE_SPECS)  # the default engine first
# the configs' field type: a name outside the registry is refused where a config is read
EngineName = Literal[ENGINE_NAMES]  # type: ignore[valid-type]


def engine_spec(name: str) -> EngineSpec:
    """The registered engine `name`; a ValueError naming the registered ones otherwise."""
    if name not in ENGINE_SPECS:
        raise ValueError(f"engine: {name!r} is not one of {', '.join(ENGINE_NAMES)}")
    return ENGINE_SPECS[name]
