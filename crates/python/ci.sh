#!/usr/bin/env bash
# Builds the tcsparse wheel in a fresh virtual environment and runs the Python tests on the CPU path
# (called by .ci/run). GPU tests (tests/test_gpu.py, marker `gpu`) skip themselves without a GPU.
#
# PyTorch: the autograd tests (gradcheck in float64) need it. PyPI's Linux wheel of torch brings the
# CUDA libraries with it (about 5.3 GB installed; 93–124 s to install on a development machine), which
# stays well inside CI's budget, so it is installed unless TCSPARSE_CI_TORCH=0; if the install
# fails, the torch tests are skipped and the count of skipped tests is printed.
set -euo pipefail
cd "$(dirname "$0")"

work="$(mktemp -d "${TMPDIR:-/tmp}/tcsparse-py.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python -m pip install --quiet "maturin>=1.9,<2" "numpy>=1.22" "scipy>=1.8" "pytest>=7"
if [ "${TCSPARSE_CI_TORCH:-1}" != "0" ]; then
    start=$(date +%s)
    if python -m pip install --quiet torch; then
        echo "== torch $(python -c 'import torch; print(torch.__version__)') installed in $(( $(date +%s) - start )) s"
    else
        echo "== torch could not be installed: its tests will be skipped"
    fi
fi

# A debug wheel: it reuses the dependencies `cargo test --workspace` already built.
maturin build --quiet --out "$work/wheels"
python -m pip install --quiet --no-index --find-links "$work/wheels" tcsparse

set +e
python -m pytest -ra -p no:cacheprovider tests 2>&1 | tee "$work/pytest.log"
rc=${PIPESTATUS[0]}
set -e
skipped=$(grep -Eo '[0-9]+ skipped' "$work/pytest.log" | tail -1 | cut -d' ' -f1 || true)
echo "== python tests skipped: ${skipped:-0} (GPU tests without a GPU; torch tests without torch)"
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: the package's tests are missing" >&2
    exit 1
fi
exit "$rc"
