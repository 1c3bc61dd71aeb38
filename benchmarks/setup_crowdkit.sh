#!/usr/bin/env bash
# Create an isolated virtual environment holding crowd-kit 1.4.2, used only as
# a comparison baseline by the benchmarks (crowdlearn never imports it).
#
# crowd-kit 1.4.2 breaks with scikit-learn >= 1.6, so it gets its own venv with
# pinned versions instead of sharing the project's environment.
#
# Usage: bash benchmarks/setup_crowdkit.sh        (idempotent)
#        PYTHON=python3.11 bash benchmarks/setup_crowdkit.sh
#        FORCE=1 bash benchmarks/setup_crowdkit.sh   (rebuild from scratch)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-crowdkit"
PYTHON="${PYTHON:-python3}"

# Pinned set that imports and runs every categorical aggregator of crowd-kit 1.4.2.
PINS=(
    "crowd-kit==1.4.2"
    "scikit-learn>=1.3,<1.6"
    "numpy>=1.24,<2.1"
    "pandas>=2.0,<2.3"
    "scipy>=1.10,<1.15"
)

check() {
    "$VENV/bin/python" - <<'EOF' 2>/dev/null
import crowdkit, sklearn
from crowdkit.aggregation import DawidSkene, MajorityVote
import pandas as pd
assert crowdkit.__version__ == "1.4.2", crowdkit.__version__
assert tuple(int(x) for x in sklearn.__version__.split(".")[:2]) < (1, 6)
df = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["w1", "w2", "w1"], "label": ["x", "x", "y"]})
assert DawidSkene(n_iter=3).fit_predict(df).to_dict() == {"a": "x", "b": "y"}
EOF
}

if [[ "${FORCE:-0}" != "1" && -x "$VENV/bin/python" ]] && check; then
    echo "crowd-kit venv already OK at $VENV"
    exit 0
fi

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "${PINS[@]}"

if ! check; then
    echo "crowd-kit venv at $VENV was created but the import/smoke check failed" >&2
    exit 1
fi
"$VENV/bin/python" -c "import crowdkit, sklearn, pandas, numpy, scipy; print('crowd-kit', crowdkit.__version__, '| scikit-learn', sklearn.__version__, '| pandas', pandas.__version__, '| numpy', numpy.__version__, '| scipy', scipy.__version__)"
echo "crowd-kit venv ready at $VENV"
