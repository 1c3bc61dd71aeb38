"""What crowdlearn holds: ``crowdlearn methods`` (the registered methods), ``datasets`` (the
bundled and shared datasets) and ``demo`` (every method on a bundled dataset)."""

from __future__ import annotations

from .common import UsageError


def _needs(tags) -> str:
    """What a method needs beyond crowd answers, from its tags ("-" for nothing)."""
    needs = []
    if tags.requires_features:
        needs.append("features")
    if tags.binary_only:
        needs.append("binary")
    return ",".join(needs) or "-"


def cmd_methods(args) -> int:
    """``crowdlearn methods``: the registered methods, one line each (kind, needs, description)."""
    from ..core.base import get_tags
    from ..registry import get_method, method_kinds

    kinds = {n: k for n, k in method_kinds().items() if args.kind in (None, k)}
    if not kinds:
        raise UsageError(f"no registered method of kind {args.kind!r}")
    rows = []
    for name, kind in kinds.items():
        try:
            cls = get_method(name)
        except ImportError as exc:
            rows.append((name, kind, "?", f"(unavailable: {exc})"))
            continue
        doc = ((cls.__doc__ or "").strip().splitlines() or [""])[0]
        rows.append((name, kind, _needs(get_tags(cls)), doc))
    widths = [max(len(r[i]) for r in rows + [("method", "kind", "needs", "")]) for i in range(3)]
    header = ("method", "kind", "needs", "description")
    for row in [header, *rows]:
        print("  ".join(f"{v:<{w}}" for v, w in zip(row[:3], widths)) + "  " + row[3])
    return 0


def cmd_demo(args) -> int:
    """``crowdlearn demo``: every method's accuracy on a bundled dataset, a line per method."""
    from .. import datasets

    data = datasets.load(args.dataset)
    print(
        f"{args.dataset}: {data.n_labels} answers, {data.n_tasks} tasks, "
        f"{data.n_workers} workers, {data.n_classes} classes; accuracy against its gold labels"
    )
    from ..benchmarking import NEEDS_FEATURES, run_methods
    from ..registry import methods as registered

    names = args.methods.split(",") if args.methods else list(registered("classification"))
    width = max(len("method"), *(len(n) for n in names))
    print(f"{'method':>{width}}  accuracy  seconds", flush=True)
    # one line per method as soon as it is fitted: the whole table takes seconds
    for name in names:
        row = run_methods({args.dataset: data}, [name], seed=args.seed).iloc[0]
        if row["error"] == NEEDS_FEATURES:
            acc = "needs features"
        elif isinstance(row["error"], str):
            acc = "error"
        else:
            acc = "n/a" if row["accuracy"] != row["accuracy"] else f"{row['accuracy']:.4f}"
        print(f"{name:>{width}}  {acc:>8}  {row['seconds']:7.3f}", flush=True)
    return 0


def cmd_datasets(args) -> int:
    """The bundled datasets and the folders of the shared root, one line each."""
    from ..datasets import list_datasets

    table = list_datasets(args.root)
    if args.kind:
        table = table[table["kind"] == args.kind]
    shown = table.drop(columns=[] if args.sources else ["source"]).astype(object).reset_index()
    shown = shown.where(shown.notna(), "-")
    shown["features"] = shown["features"].map(lambda f: f if f else "-")
    shown["description"] = shown["description"].map(lambda d: d if len(d) <= 70 else d[:67] + "...")
    text = shown.astype(str)
    widths = {c: max(len(c), *text[c].str.len()) if len(text) else len(c) for c in text.columns}
    numeric = ("answers", "tasks", "workers", "classes", "gold", "features")

    def line(cells: dict) -> str:  # numbers right-aligned, words left-aligned
        return "  ".join(f"{v:>{widths[c]}}" if c in numeric else f"{v:<{widths[c]}}"
                         for c, v in cells.items()).rstrip()

    print(line({c: c for c in text.columns}))
    for row in text.to_dict("records"):
        print(line(row))
    return 0
