"""Robustness benchmark: spammer / adversary detection, SpammerFiltered, GroupAwareDawidSkene.

Prints markdown tables (paste into benchmarks/RESULTS.md)::

    OMP_NUM_THREADS=1 python benchmarks/robustness.py [--data /work/shared/data] [--seeds 5]

1. detect_spammers sensitivity / specificity on synthetic crowds (N = 10,000, K = 4, M = 20,
   5 labels per task, 25% uniform spammers), mean ± sd over seeds;
2. MV / DS with and without spammer filtering on every categorical dataset (gold accuracy);
3. detect_adversaries on crowds with colluders and below-chance adversaries, and on the real sets;
4. group-ds vs ds on crowds where groups of workers copy a leader.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.benchmarking import categorical_datasets, gold_accuracy
from crowdlearn.core.io import load_folder
from crowdlearn.diagnostics.detection import detect_adversaries, detect_spammers
from crowdlearn.simulate import WorkerSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_md import recording  # noqa: E402  (benchmarks/ is on sys.path)

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"


def ms(x) -> str:
    x = np.asarray(x, dtype=float)
    return f"{x.mean():.3f} ± {x.std(ddof=1) if len(x) > 1 else 0.0:.3f}"


def spammer_table(seeds: int) -> None:
    print("### Spammer detection (N=10,000, K=4, M=20, 5 labels/task, 25% uniform spammers)\n")
    print("| setting | sensitivity | specificity | flagged |")
    print("|---|---|---|---|")
    for frac in (0.25, 0.0):
        sens, spec, nflag = [], [], []
        for seed in range(seeds):
            data = simulate.dawid_skene(10_000, 20, 4, labels_per_task=5, spammers=frac, seed=seed)
            flag = detect_spammers(data)["spammer"].to_numpy()
            planted = data.planted.kind == "spammer"
            if planted.any():
                sens.append(flag[planted].mean())
            spec.append((~flag[~planted]).mean())
            nflag.append(flag.sum())
        s = ms(sens) if sens else "n/a"
        print(f"| {int(frac * 100)}% spammers, {seeds} seeds | {s} | {ms(spec)} | {ms(nflag)} |")
    print()


def real_table(root: Path) -> None:
    print("### MV / DS with and without spammer filtering (gold accuracy)\n")
    print("| dataset | tasks | workers | flagged | answers removed | MV | MV filtered | DS | DS filtered |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in categorical_datasets(root):
        data = load_folder(root / name)
        row = [name, str(data.n_tasks), str(data.n_workers)]
        try:
            accs = {}
            for base in ("mv", "ds"):
                accs[base] = gold_accuracy(cl.get_method(base)().fit(data).labels_, data)
                f = cl.SpammerFiltered(base=base).fit(data)
                accs[base + "f"] = gold_accuracy(f.labels_, data)
            row += [str(int(f.spammers_["spammer"].sum())), str(f.n_removed_)]
            row += [f"{accs[k]:.4f}" for k in ("mv", "mvf", "ds", "dsf")]
        except ValueError as err:  # e.g. too many classes for DS
            row += ["-", "-"] + [f"error: {str(err)[:40]}"] * 4
        print("| " + " | ".join(row) + " |", flush=True)
    print()


#: adversary scenarios: (description, simulate.dawid_skene arguments); the colluders form groups
#: of ``colluder_group_size`` (a remainder of one is a lone worker copying nobody, counted as
#: a colluder it cannot be found as)
ADVERSARY_SCENARIOS = [
    ("N=5,000, K=3, M=30, 6 labels/task, 20% colluders (groups of 5), 10% below-chance",
     dict(n_tasks=5000, n_workers=30, n_classes=3, labels_per_task=6, colluders=0.2, adversaries=0.1)),
    ("N=3,000, K=3, M=40, 6 labels/task, 20% colluders in pairs, 10% below-chance",
     dict(n_tasks=3000, n_workers=40, n_classes=3, labels_per_task=6, colluders=0.2, colluder_group_size=2,
          adversaries=0.1)),
    ("N=4,000, K=10, M=35, 3 labels/task, 20% colluders (groups of 3), 10% below-chance",
     dict(n_tasks=4000, n_workers=35, n_classes=10, labels_per_task=3, colluders=0.2, colluder_group_size=3,
          adversaries=0.1)),
    ("N=2,000, K=35, M=35, 3 labels/task, honest crowd",
     dict(n_tasks=2000, n_workers=35, n_classes=35, labels_per_task=3)),
    ("N=2,000, K=2, M=20, 5 labels/task, honest crowd",
     dict(n_tasks=2000, n_workers=20, n_classes=2, labels_per_task=5)),
]


def adversary_table(seeds: int) -> None:
    print(f"### Adversary detection on simulated crowds (sums over {seeds} seeds)\n")
    print("| crowd | colluders flagged | of which in a group of 2+ | below-chance flagged | honest falsely flagged |")
    print("|---|---|---|---|---|")
    for name, kw in ADVERSARY_SCENARIOS:
        found = grouped = n_col = n_grouped = below = n_adv = false = n_hon = 0
        for seed in range(seeds):
            data = simulate.dawid_skene(**kw, seed=seed)
            t = detect_adversaries(data)
            kind, leader = data.planted.kind, data.planted.leader
            col, adv, hon = kind == "colluder", kind == "adversary", kind == "diligent"
            in_group = col & (np.bincount(np.maximum(leader, 0), minlength=len(leader))[np.maximum(leader, 0)] > 1)
            flagged = t["colluding"].to_numpy()
            found += int(flagged[col].sum())
            n_col += int(col.sum())
            grouped += int(flagged[in_group].sum())
            n_grouped += int(in_group.sum())
            below += int(t["below_chance"].to_numpy()[adv].sum())
            n_adv += int(adv.sum())
            false += int(t["adversary"].to_numpy()[hon].sum())
            n_hon += int(hon.sum())
        print(f"| {name} | {found}/{n_col} | {grouped}/{n_grouped} | {below}/{n_adv} | {false}/{n_hon} |", flush=True)
    print()


def real_adversary_table(root: Path) -> None:
    print("### Workers flagged by `detect_adversaries` on the real sets (nothing planted: a flag is a claim)\n")
    print("| dataset | workers | colluding | below chance | largest pair z | critical z | groups of 2+ (group-ds) "
          "| DS | group-ds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in categorical_datasets(root):
        data = load_folder(root / name)
        t = detect_adversaries(data)
        crit = t.attrs.get("critical_z", float("nan"))  # (none for too many classes)
        z = t["z"].max()
        ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
        g = cl.GroupAwareDawidSkene().fit(data)
        multi = int((g.groups_.value_counts() > 1).sum())
        print(f"| {name} | {data.n_workers} | {int(t['colluding'].sum())} | {int(t['below_chance'].sum())} "
              f"| {'-' if not np.isfinite(z) else f'{z:.2f}'} | {crit:.2f} | {multi} | {ds:.4f} "
              f"| {gold_accuracy(g.labels_, data):.4f} |", flush=True)
    print()


def group_table(seeds: int) -> None:
    print("### group-ds vs ds on colluder crowds (N=3,000, K=3, 15 diligent (acc 0.6-0.8) + "
          "2 groups of 6 copiers of weak leaders (acc 0.5-0.6, copy prob 0.95), 6 labels/task)\n")
    print("| seed | MV | DS | group-ds | groups found | planted groups recovered |")
    print("|---|---|---|---|---|---|")
    gains = []
    for seed in range(seeds):
        specs = [
            WorkerSpec.diligent(15, (0.6, 0.8)),
            WorkerSpec.colluders(12, group_size=6, base=WorkerSpec.one_coin(12, (0.5, 0.6)), copy_prob=0.95),
        ]
        data = simulate.crowd(3000, 3, specs, labels_per_task=6, seed=seed)
        mv = gold_accuracy(cl.MajorityVote().fit(data).labels_, data)
        ds = gold_accuracy(cl.DawidSkene().fit(data).labels_, data)
        g = cl.GroupAwareDawidSkene().fit(data)
        gds = gold_accuracy(g.labels_, data)
        gains.append(gds - ds)
        leader = data.planted.leader
        groups = g.groups_.to_numpy()
        ok = 0
        leads = np.unique(leader[leader >= 0])
        for lead in leads:
            mem = np.flatnonzero(leader == lead)
            ok += len(set(groups[mem])) == 1 and (groups == groups[mem[0]]).sum() == len(mem)
        multi = int((np.bincount(groups) > 1).sum())
        print(f"| {seed} | {mv:.4f} | {ds:.4f} | {gds:.4f} | {multi} | {ok}/{len(leads)} |", flush=True)
    print(f"\nmean gain of group-ds over ds: {ms(gains)}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--write-results", nargs="?", const="robustness", metavar="SECTION",
                    help="also write the output to this RESULTS.md section (default robustness)")
    args = ap.parse_args()
    with recording(args.write_results or "", enabled=bool(args.write_results)):
        t0 = time.perf_counter()
        spammer_table(args.seeds)
        adversary_table(args.seeds)
        group_table(args.seeds)
        real_table(args.data)
        real_adversary_table(args.data)
        print(f"_total {time.perf_counter() - t0:.0f} s (OMP_NUM_THREADS=1)_")


if __name__ == "__main__":
    main()
