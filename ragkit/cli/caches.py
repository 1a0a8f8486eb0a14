"""``ragkit cache size`` and ``ragkit cache prune``: a thin layer over ``ragkit.caches.pruning``."""

from __future__ import annotations

import argparse
import time


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp is not None else "-"


def _cmd_size(args: argparse.Namespace) -> int:
    from ragkit.caches.pruning import cache_sizes
    from ragkit.settings import get_settings

    print(f"{'cache':<11}{'entries':>10}{'MB':>10}  {'oldest':<17} newest")
    for size in cache_sizes(get_settings().resolved_data_dir()):
        print(f"{size.cache:<11}{size.entries:>10}{size.bytes / 1e6:>10.1f}  {_when(size.oldest):<17} "
              f"{_when(size.newest)}")
    return 0


def _cmd_prune(args: argparse.Namespace) -> int:
    from ragkit.caches.pruning import keep_set, parse_duration, prune_caches
    from ragkit.settings import get_settings

    seconds = parse_duration(args.older_than)
    keep = keep_set(args.keep_runs) if args.keep_runs else None  # every folder checked before anything goes
    verb = "would remove" if args.dry_run else "removed"
    kept_for = f" (keeping what {len(args.keep_runs)} results folder(s) need)" if args.keep_runs else ""
    for result in prune_caches(get_settings().resolved_data_dir(), seconds, dry_run=args.dry_run, keep=keep):
        print(f"{result.cache}: {verb} {result.removed} entries older than {args.older_than}{kept_for}, "
              f"{result.kept} kept")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    cache = sub.add_parser("cache", help="size of the LLM, retrieval and embedding caches, or prune old entries")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    cache_sub.add_parser("size", help="entries, MB and oldest/newest write per cache").set_defaults(func=_cmd_size)
    prune = cache_sub.add_parser("prune", help="remove LLM, retrieval and embedding cache entries written before "
                                               "a limit (they are recomputed when asked for again)")
    prune.add_argument("--older-than", default="30d", metavar="DURATION",
                       help="age limit: a number and s, m, h, d or w (default: 30d)")
    prune.add_argument("--keep-runs", nargs="+", default=[], metavar="DIR",
                       help="results folders whose recorded cache entries are kept whatever their age "
                            "(a folder without records is an error)")
    prune.add_argument("--dry-run", action="store_true", help="count what would be removed, remove nothing")
    prune.set_defaults(func=_cmd_prune)
