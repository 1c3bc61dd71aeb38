"""``crowdlearn preferences``: preference annotations to a preference per (prompt, pair), and
DPO-ready JSON Lines."""

from __future__ import annotations

import sys

from .common import UsageError, parse_params, write_output


def cmd_preferences(args) -> int:
    """Preference annotations -> a preference per (prompt, pair), and DPO-ready JSON Lines."""
    from ..core.tables import check_writable, naming_file
    from ..pairwise.preferences import PreferenceAggregator, Preferences

    if args.out:
        check_writable(args.out)
    if args.dpo:  # JSON Lines whatever its name; its folder is checked now, not after the fit
        check_writable(args.dpo, table=False)
    if not 0.0 <= args.min_confidence <= 1.0:
        raise UsageError(f"--min-confidence is a probability in [0, 1]; got {args.min_confidence}")
    with naming_file(args.input):
        prefs = Preferences.from_csv(args.input)
    params = parse_params(args.param)
    agg = PreferenceAggregator(method=args.method, params=params or None,
                               random_state=0 if args.seed is None else args.seed)
    agg.fit(prefs)
    write_output(agg.result_frame(), args.out)
    summary = f"preferences ({args.method}): {prefs!r}"
    if args.dpo:
        n = agg.to_dpo_jsonl(args.dpo, min_confidence=args.min_confidence)
        summary += f"; wrote {n} DPO lines (confidence >= {args.min_confidence}) to {args.dpo}"
    print(summary, file=sys.stderr)
    return 0
