#!/usr/bin/env bash
# Wheels for a lent GPU machine (Python 3.12, its own torch, no network), into .whl/ (.gitignore):
#   bash scripts/gpu_wheels.sh            # here, with the package registry in reach
# then carry `.whl` to the device; scripts/gpu_check.sh installs them to /tmp/site there.
# Downloads the project's pins for cp312/manylinux with their dependencies, builds DeepSpeed's
# pure-Python wheel from its sdist (no ops: the GPU machine JIT-builds what it needs), and keeps
# only what the GPU image lacks: torch, its CUDA libraries and the image's own packages stay.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
pins=$(grep -oE '"(megatron-core|mlflow|datasets|submitit|pydantic|deepspeed)==[^"]+"' pyproject.toml | tr -d '"')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platform=(--only-binary=:all: --python-version 3.12 --implementation cp)
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platform+=(--platform "$tag")
done
# everything but DeepSpeed (an sdist only) resolves as binaries for the target
"$PYTHON" -m pip download -q "${platform[@]}" -d "$work" $(echo "$pins" | grep -v deepspeed) \
  hjson msgpack py-cpuinfo ninja einops
"$PYTHON" -m pip wheel -q --no-deps -w "$work" "$(echo "$pins" | grep deepspeed)"
# the GPU image's own packages (the device's KINDS list): carrying them would replace its builds
image="torch triton numpy scipy pandas matplotlib pyyaml typer rich tokenizers psutil
nvidia_ml_py requests urllib3 idna certifi charset_normalizer packaging pillow fsspec filelock
jinja2 markupsafe sympy mpmath networkx typing_extensions click pyarrow xxhash aiohttp
aiosignal frozenlist multidict yarl propcache attrs aiohappyeyeballs huggingface_hub hf_xet
tqdm protobuf six python_dateutil pytz tzdata contourpy cycler fonttools kiwisolver pyparsing
joblib threadpoolctl scikit_learn werkzeug markdown_it_py mdurl pygments shellingham h11
anyio httpx httpcore sniffio zipp einops msgpack ninja py_cpuinfo cloudpickle narwhals
annotated_doc cuda_bindings cuda_pathfinder cuda_core cuda_toolkit"
mkdir -p .whl
rm -f .whl/*.whl
kept=0
for wheel in "$work"/*.whl; do
  name=$(basename "$wheel" | sed 's/-[0-9].*//' | tr 'A-Z-' 'a-z_')
  case "$name" in nvidia_*) continue ;; esac
  if echo "$image" | tr ' ' '\n' | grep -qx "$name"; then continue; fi
  cp "$wheel" .whl/
  kept=$((kept + 1))
done
echo "$kept wheels in .whl/ ($(du -sh .whl | cut -f1)); carry .whl and run: bash scripts/gpu_check.sh"
