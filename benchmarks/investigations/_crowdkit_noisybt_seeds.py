"""crowd-kit 1.4.2's ``NoisyBradleyTerry`` at several ``random_state`` values: its scores and
what its L-BFGS-B run reported (iterations, message).

Runs inside ``benchmarks/.venv-crowdkit`` (called by ``benchmarks/pairwise.py``); never
imports crowdlearn; prints one JSON object ``{random_state: {"scores": {item: score},
"nit": int, "message": str}}``.  Input: a ``worker,left,right,label`` CSV (ties dropped),
items prefixed by ``--group-col`` as the runner does.

Usage (in the crowd-kit venv)::

    python _crowdkit_noisybt_seeds.py --csv FILE [--group-col query] [--seeds 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--csv", required=True)
    p.add_argument("--group-col", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = p.parse_args(argv)

    import pandas as pd
    import crowdkit.aggregation.pairwise.noisy_bt as nbt_module
    from crowdkit.aggregation import NoisyBradleyTerry

    df = pd.read_csv(args.csv, dtype=str, keep_default_na=False)
    if args.group_col:
        for col in ("left", "right", "label"):
            df[col] = df[args.group_col] + "::" + df[col]
    df = df[(df["label"] == df["left"]) | (df["label"] == df["right"])]
    df = df[["worker", "left", "right", "label"]].reset_index(drop=True)

    runs = []
    original = nbt_module.minimize

    def spy(*a, **k):  # record what scipy's L-BFGS-B reported to crowd-kit
        res = original(*a, **k)
        runs.append({"nit": int(res.nit), "message": str(res.message)})
        return res

    nbt_module.minimize = spy
    out = {}
    for seed in args.seeds:
        scores = NoisyBradleyTerry(random_state=seed).fit_predict(df)
        out[str(seed)] = {"scores": {str(k): float(v) for k, v in scores.items()}, **runs[-1]}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
