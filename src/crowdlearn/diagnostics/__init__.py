"""Diagnostics of a crowd and of a fit: spammer, adversary and dependency detection
(:mod:`.detection`) and metrics against gold and of agreement (:mod:`.metrics`)."""
