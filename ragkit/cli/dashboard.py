"""`ragkit dashboard`: start the Streamlit app, bound to this machine unless told otherwise."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragkit.errors import ConfigError
from ragkit.settings import TOKEN_ENV

LOOPBACK_NAMES = ("localhost",)
MIN_TOKEN_CHARS = 16


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def _remote_access_token(args: argparse.Namespace) -> str:
    """The token a dashboard bound beyond loopback requires, after refusing to bind without the
    explicit flag; printed once when generated, so it never has to go on a command line."""
    import secrets

    from ragkit.settings import get_settings

    if not args.allow_remote:
        raise ConfigError(
            f"--host {args.host} lets other machines reach the dashboard, which reads files on this server and "
            "runs jobs. Add --allow-remote to do it with a required access token (set it in "
            f"{TOKEN_ENV}, or one is generated), or keep the default --host 127.0.0.1"
        )
    configured = get_settings().dashboard_token
    token = configured.get_secret_value() if configured else ""
    if token and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{TOKEN_ENV} is {len(token)} characters: use at least {MIN_TOKEN_CHARS}, "
                          "or unset it to have a random token generated")
    if not token:
        token = secrets.token_urlsafe(24)
        print(f"access token (shown only now): {token}")
    print(f"warning: the dashboard listens on {args.host}:{args.port}, reachable from other machines; anyone with "
          "the access token can read files under this server's paths and run jobs. Use a trusted network.",
          file=sys.stderr)
    return token


def _cmd_dashboard(args: argparse.Namespace) -> int:
    import os
    import subprocess

    environment = dict(os.environ)
    if not _is_loopback(args.host):
        environment[TOKEN_ENV] = _remote_access_token(args)
    if args.demo:
        # The demo opens on a finished quickstart: run it first (a no-op once it is complete).
        quickstart = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.yaml"
        args.run_experiment(str(quickstart))
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"  # beside the ragkit package
    print(f"dashboard on http://{args.host}:{args.port}")
    # The token reaches the app through the environment: `ps` shows command lines to every user.
    return subprocess.call(streamlit_command(app, args.host, args.port), env=environment)


def streamlit_command(app: Path, host: str, port: int) -> list[str]:
    """The command serving ``app`` as the dashboard is served (benchmarks serve a bare page with it)."""
    from ragkit.settings import get_settings

    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.address", host, "--server.port", str(port),
        "--server.maxUploadSize", str(int(get_settings().max_file_mb)),
        "--server.headless", "true", "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
        "--server.enableXsrfProtection", "true",
        # Watching the sources (for "run on save" while developing) made every new session scan each
        # loaded module for files to watch: 0.5-0.7 s of the server's CPU per session, under one GIL.
        "--server.fileWatcherType", "none",
    ]


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"port must be a number from 1 to 65535, got {text!r}")
    return int(text)


def _run_experiment(path: str) -> int:
    """The demo runs the quickstart first, through the same `run` command."""
    from ragkit.cli import _cmd_run, build_parser

    return _cmd_run(build_parser().parse_args(["run", path]))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The `dashboard` command."""
    dashboard = sub.add_parser("dashboard", help="start the Streamlit dashboard")
    dashboard.add_argument("--demo", action="store_true", help="first run the quickstart on the bundled sample")
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (default: only this machine)")
    dashboard.add_argument("--port", type=_port, default=8501)
    dashboard.add_argument("--allow-remote", action="store_true",
                           help="allow a --host other machines can reach; requires an access token "
                                f"({TOKEN_ENV}, or one is generated and printed)")
    dashboard.set_defaults(func=_cmd_dashboard, run_experiment=_run_experiment)
