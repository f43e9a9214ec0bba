"""Model and parallelism configs: plain dataclasses, validated once before anything is built.

Every shape constraint that megatron-core would otherwise hit deep inside a process group (as an
assert or a hang) is checked here, so a bad config fails with a ValueError naming the field and
the fix before any process group, tensor or job exists.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from models.catalog.sites import SEPARATE_QKV
from models.catalog.variants import (
    BUILTIN_VARIANTS,
    did_you_mean,
    load_variant,
    module_origin,
    variant_module,
)

# Built-in names, or a variant of the user's own (`models.catalog.variants`: "module:function" or an
# entry-point name).
QueryVariant = str
QUERY_VARIANTS: tuple[str, ...] = BUILTIN_VARIANTS
POSITION_EMBEDDINGS: tuple[str, ...] = ("learned", "rope")


@dataclass
class ModelConfig:
    """A GPT-2-style pre-LN decoder (no biases, no dropout) with a choice of query projection.

    ``ffn_hidden_size`` None means 4·d; the paper's "wider MLP" baseline sets it to 4.75·d.
    ``head_dim`` None means d / heads; the full-width query variants need heads·head_dim == d.
    """

    vocab_size: int
    seq_length: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int | None = None
    ffn_hidden_size: int | None = None
    query_variant: QueryVariant = "linear"
    qk_norm: bool = False
    position_embedding: Literal["learned", "rope"] = "learned"
    tie_embeddings: bool = True
    init_std: float = 0.02
    head_dim: int | None = None

    @property
    def ffn_size(self) -> int:
        """FFN width: 4·d unless set (GPT-2's MLP ratio)."""
        return self.ffn_hidden_size if self.ffn_hidden_size is not None else 4 * self.hidden_size

    @property
    def query_groups(self) -> int:
        """Number of key/value heads (None = one per query head, i.e. plain multi-head)."""
        return (
            self.num_query_groups if self.num_query_groups is not None else self.num_attention_heads
        )

    @property
    def kv_channels(self) -> int:
        """Per-head width."""
        if self.head_dim is not None:
            return self.head_dim
        return self.hidden_size // self.num_attention_heads

    @property
    def query_width(self) -> int:
        """Width of the concatenated queries of all heads."""
        return self.num_attention_heads * self.kv_channels

    def validate(self, arm_fields: bool = True) -> None:
        """Raise ValueError naming the field and the fix for any inconsistent shape.

        `arm_fields`: also hold the config to its variant's own `model` fields (a single run
        config naming a variant that sets ``num_query_groups`` must set it too; a study applies
        them itself, `arm_model_fields`)."""
        for name in (
            "vocab_size",
            "seq_length",
            "num_layers",
            "hidden_size",
            "num_attention_heads",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("num_query_groups", "ffn_hidden_size", "head_dim"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name}: must be a positive integer or null, got {value!r}")
        try:
            variant = load_variant(self.query_variant)
        except ValueError as err:
            raise ValueError(f"query_variant: {err}") from err
        if self.position_embedding not in POSITION_EMBEDDINGS:
            raise ValueError(
                f"position_embedding: {self.position_embedding!r} is unknown; "
                f"use one of {', '.join(POSITION_EMBEDDINGS)}"
            )
        if not (isinstance(self.init_std, int | float) and self.init_std > 0):
            raise ValueError(f"init_std: must be a positive number, got {self.init_std!r}")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size: {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}; pick a multiple of it (or set head_dim)"
            )
        if self.num_attention_heads % self.query_groups:
            raise ValueError(
                f"num_query_groups: {self.query_groups} does not divide num_attention_heads "
                f"{self.num_attention_heads}; use a divisor of it (or null for one per head)"
            )
        separate = set(SEPARATE_QKV) & set(variant.site_names())
        if separate and self.query_width != self.hidden_size:
            raise ValueError(
                f"head_dim: variant {self.query_variant!r} replaces {sorted(separate)[0]}, which "
                "splits the fused QKV projection; the query is then built from X itself, "
                f"so num_attention_heads * head_dim ({self.query_width}) must equal hidden_size "
                f"({self.hidden_size}); leave head_dim null"
            )
        if variant.check is not None:
            variant.check(self, 1)
        if arm_fields and variant.model is not None:
            self._check_arm_fields(variant)
        if self.position_embedding == "rope" and self.kv_channels % 2:
            raise ValueError(
                f"position_embedding: 'rope' rotates pairs of channels, but the head width "
                f"{self.kv_channels} is odd; change hidden_size/num_attention_heads or use "
                "'learned'"
            )

    def _check_arm_fields(self, variant: Any) -> None:
        """The fields the variant sets for its arm must hold here: a model built without them
        would be another model under the variant's name."""
        try:
            expected = variant.model(self) if callable(variant.model) else variant.model
        except Exception:  # noqa: BLE001 - its own error is reported where a study applies it
            return
        for key, value in expected.items() if isinstance(expected, dict) else []:
            if hasattr(self, key) and getattr(self, key) != value:
                raise ValueError(
                    f"{key}: variant {self.query_variant!r} sets {key} = {value!r} for its arm "
                    f"(its model), this config has {getattr(self, key)!r}; set {key}: "
                    f"{value!r} (a study applies it for you)"
                )

    def validate_parallel(self, parallel: ParallelConfig) -> None:
        """Raise ValueError if ``parallel`` cannot split this model (before any group exists)."""
        self.validate()
        parallel.validate()
        tp, pp = parallel.tensor_parallel, parallel.pipeline_parallel
        checks = [
            (self.num_attention_heads, "num_attention_heads", tp, "tensor_parallel"),
            (self.query_groups, "num_query_groups", tp, "tensor_parallel"),
            (self.ffn_size, "ffn_hidden_size", tp, "tensor_parallel"),
            (self.vocab_size, "vocab_size", tp, "tensor_parallel"),
            (self.num_layers, "num_layers", pp, "pipeline_parallel"),
        ]
        check = load_variant(self.query_variant).check
        if check is not None:
            check(self, tp)
        for value, name, parts, pname in checks:
            if value % parts:
                raise ValueError(
                    f"parallel.{pname}: {parts} does not divide {name} ({value}); "
                    f"choose a {pname} that divides it"
                )


@dataclass
class ParallelConfig:
    """How one model is spread over processes: world size = TP x PP x DP."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel

    def validate(self) -> None:
        for name in ("tensor_parallel", "pipeline_parallel", "data_parallel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"parallel.{name}: must be a positive integer, got {value!r}")


# ModelConfig fields a variant may not override, and who sets them instead: the size's shape
# names the rung (its nominal N, tokens, LR), the data the vocabulary and context.
STUDY_OWNED_FIELDS: dict[str, str] = {
    "vocab_size": "the data (its tokenizer)",
    "seq_length": "the study's model.seq_length",
    "num_layers": "the size (sizes / ladder.shapes)",
    "hidden_size": "the size (sizes / ladder.shapes)",
    "num_attention_heads": "the size (sizes / ladder.shapes)",
    "query_variant": "the study's variants",
}
_BOOL_FIELDS = ("qk_norm", "tie_embeddings")


def overridable_fields() -> list[str]:
    """The `ModelConfig` fields a variant's `model` may set for its arm."""
    return [f.name for f in fields(ModelConfig) if f.name not in STUDY_OWNED_FIELDS]


def arm_model_fields(model: dict[str, Any]) -> dict[str, Any]:
    """`model` (a `ModelConfig`'s fields, the study's for one size and arm) with the arm's
    variant's own `model` overrides on top (`models.catalog.sites.Variant.model`).

    Checked here, before any cell exists: an override of a field that is not a `ModelConfig`
    field, or one the study owns (`STUDY_OWNED_FIELDS`), or a value the config refuses, raises
    ValueError naming the variant, its file and the field. Fields the study itself gets wrong
    are left to the run config's own check (they are the study's, not the variant's).
    """
    name = model.get("query_variant", "linear")
    try:
        variant = load_variant(name)
    except ValueError:
        return model  # reported as the variant's own problem elsewhere
    if variant.model is None:
        return model
    where = f"variant {variant.name!r} ({_variant_file(name)})"
    try:
        base = ModelConfig(**model)
        base.validate(arm_fields=False)
    except (TypeError, ValueError):
        return model  # the study's own problem: reported by the run config's check
    if callable(variant.model):
        try:
            overrides = variant.model(base)
        except Exception as err:  # noqa: BLE001 - the user's function: say what it raised
            raise ValueError(
                f"{where}: its model function raised {type(err).__name__}: {err}"
            ) from err
    else:
        overrides = variant.model
    if not isinstance(overrides, dict):
        raise ValueError(
            f"{where}: model must be a dict of ModelConfig field -> value (or a function of "
            f"the config returning one), got {type(overrides).__name__}"
        )
    allowed = overridable_fields()
    for key, value in overrides.items():
        if key in STUDY_OWNED_FIELDS:
            raise ValueError(
                f"{where}: model.{key} is set by {STUDY_OWNED_FIELDS[key]}, not by a variant; "
                f"a variant may set {', '.join(allowed)}"
            )
        if key not in allowed:
            raise ValueError(
                f"{where}: model.{key} is not a model config field"
                f"{did_you_mean(str(key), allowed)}; a variant may set {', '.join(allowed)}"
            )
        if key in _BOOL_FIELDS and not isinstance(value, bool):
            raise ValueError(f"{where}: model.{key}: must be true or false, got {value!r}")
    merged = {**model, **overrides}
    try:
        ModelConfig(**merged).validate()
    except ValueError as err:
        raise ValueError(f"{where}: its model overrides {overrides}: model.{err}") from None
    return merged


def _variant_file(name: str) -> str:
    module = variant_module(name)
    return module_origin(module) if module else "models/catalog/builtin_variants.py"
