"""`scaling prepare-data`: build a DataPrepConfig from a file and/or options, then prepare()."""

from __future__ import annotations

from pathlib import Path

import typer

OVERRIDES = (
    "source",
    "output_dir",
    "text_field",
    "tokenizer",
    "vocab_size",
    "eod_token",
    "dtype",
    "validation_fraction",
    "split_seed",
    "num_proc",
    "streaming",
    "max_documents",
    "max_bytes",
)


def prepare_data(
    config: Path | None = typer.Option(
        None, "--config", help="YAML/JSON DataPrepConfig; options below override its fields."
    ),
    source: str | None = typer.Option(
        None, help="stdlib | hf:NAME[:CONFIG][:SPLIT] | a .txt/.jsonl/.parquet file, dir or glob."
    ),
    output_dir: str | None = typer.Option(None, "--output", "-o", help="Prepared directory."),
    text_field: str | None = typer.Option(None, help="Column holding the text (jsonl/parquet/hf)."),
    tokenizer: str | None = typer.Option(
        None, help="'bpe' (train a byte-level BPE) or a HF tokenizer name / tokenizer.json path."
    ),
    vocab_size: int | None = typer.Option(None, help="Vocab of the trained BPE."),
    eod_token: str | None = typer.Option(None, help="End-of-document token of a HF tokenizer."),
    dtype: str | None = typer.Option(None, help="auto | uint16 | int32 token storage."),
    validation_fraction: float | None = typer.Option(None, help="Share of validation documents."),
    split_seed: int | None = typer.Option(None, help="Seed of the document-level split."),
    num_proc: int | None = typer.Option(None, help="Tokeniser processes."),
    streaming: bool | None = typer.Option(
        None, help="Stream an hf: source instead of downloading."
    ),
    max_documents: int | None = typer.Option(None, help="Keep only the first N documents."),
    max_bytes: int | None = typer.Option(None, help="Stop after this many bytes of text."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Rebuild even if the output is reusable. Replaces only a dataset prepare-data made.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and stop."),
) -> None:
    """Tokenise a corpus into megatron train/valid splits with a manifest (reused if unchanged)."""
    import json

    # lazy: the `scaling` CLI imports this module to register the command; keep --help fast
    from data_prep.config import DataPrepConfig
    from foundation.config import from_dict, load_file, to_dict

    values = locals()
    try:
        data = load_file(config) if config is not None else {}
        data.update({k: values[k] for k in OVERRIDES if values[k] is not None})
        resolved = from_dict(DataPrepConfig, data, where="data_prep")
        if dry_run:
            typer.echo(json.dumps(to_dict(resolved), indent=2))
            return

        from data_prep.output import OutputWriteError  # lazy, as the config imports above
        from data_prep.preparation import prepare  # lazy: datasets and tokenizers

        manifest = prepare(resolved, force=force, progress=True)
    except ValueError as err:  # bad input: the message names the field and the fix
        typer.echo(f"error: prepare-data: {err}", err=True)
        raise typer.Exit(2) from err
    except OutputWriteError as err:  # full disk, file-size limit: the file, the fault, the fix
        typer.echo(f"error: prepare-data: {err.strerror}", err=True)
        raise typer.Exit(1) from err
    splits = manifest["splits"]
    typer.echo(
        f"{manifest.path}: vocab {manifest.vocab_size} ({manifest['dtype']}), "
        f"train {splits['train']['documents']} docs / {splits['train']['tokens']} tokens, "
        f"valid {splits['valid']['documents']} docs / {splits['valid']['tokens']} tokens"
    )
