"""Inference cost of each query variant beside the linear baseline, per size, in one process.

    .venv/bin/python benchmarks/bench_inference.py --quick          # CPU, tiny sizes, ~1 min
    .venv/bin/python benchmarks/bench_inference.py                  # GPU: 124M and 350M shapes
    .venv/bin/python benchmarks/bench_inference.py --json out.json  # also write the figures

Per size every variant is built (same seed) and measured by `scaling.inference_cost.inference`:
prefill tokens/s, KV-cache decode ms per step at batch 1 and 32, peak memory. The variants of
one size run side by side (ABBA rounds, median over repeats), so load drifts hit all of them
alike; the ratio columns are variant / linear cost (above 1: costlier; prefill as time per
token), each timed one the median of its per-round ratios with their interquartile range, or
"unresolved" where the rounds disagree beyond `analysis.stats.inference.RATIO_BOUND`. On a GPU
the models run in bf16, as the study trains; on CPU in fp32 and the figures are CPU figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models import ModelConfig  # noqa: E402

VARIANTS = ("linear", "identity", "nonlinear", "residual_linear")
# name -> (layers, d, heads, seq_length, vocab)
GPU_SIZES = {"124M": (12, 768, 12, 1024, 50304), "350M": (24, 1024, 16, 1024, 50304)}
CPU_SIZES = {"800K": (4, 128, 8, 128, 2048), "3M": (6, 192, 6, 128, 2048)}
QUICK_SIZES = {"100K": (2, 64, 4, 64, 257), "800K": (4, 128, 8, 128, 2048)}
RATIOS = (("prefill", "prefill"), ("decode b1", "decode_b1"), ("decode b32", "decode_b32"))
RATIOS += (("memory", "memory"), ("KV cache", "kv_cache"))


def main() -> None:
    import torch

    from analysis.report.sections.inference import ratio_text
    from analysis.stats.inference import inference_summary
    from scaling.inference_cost.inference import InferenceSettings, measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny CPU sizes, 3 repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    sizes = QUICK_SIZES if args.quick else (GPU_SIZES if cuda else CPU_SIZES)
    repeats = args.repeats or (3 if args.quick else 5)
    out = {}
    for size, (layers, d, heads, seq, vocab) in sizes.items():
        configs = {
            v: ModelConfig(
                vocab_size=vocab,
                seq_length=seq,
                num_layers=layers,
                hidden_size=d,
                num_attention_heads=heads,
                query_variant=v,
            )
            for v in VARIANTS
        }
        settings = InferenceSettings.for_seq_length(seq, repeats=repeats, warmup=2)
        figures = measure(configs, settings, bf16=cuda)
        base = figures["linear"]
        device = base["device"]
        print(
            f"\n{size} (L{layers} d{d} h{heads}, prompt {settings.prompt_len} x "
            f"{settings.prefill_batch}, {settings.decode_steps} decode steps) on {device}"
            f"{' (CPU figures)' if device == 'cpu' else ''}; memory: {base['memory_kind']}"
        )
        rows = [{"variant": v, "size": size, "session": size, **f} for v, f in figures.items()]
        summary = inference_summary({"device": device, "rows": rows}, "linear")["ratios"]
        print(
            f"{'variant':<16}{'prefill tok/s':>14}{'ms b1':>9}{'ms b32':>9}{'MiB':>9}"
            + "".join(f"{name:>24}" for name, _ in RATIOS)
        )
        for v, f in figures.items():
            ratios = summary.get(v, {}).get(size, {})
            print(
                f"{v:<16}{f['prefill_tok_s']:>14.0f}{f['decode_ms_b1']:>9.2f}"
                f"{f['decode_ms_b32']:>9.2f}{f['peak_mem_mb']:>9.1f}"
                + "".join(f"{ratio_text(ratios.get(k)) if ratios else '1':>24}" for _, k in RATIOS)
            )
        out[size] = figures
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
