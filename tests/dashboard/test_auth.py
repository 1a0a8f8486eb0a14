"""Dashboard exposure: loopback by default, anything else only with --allow-remote and a token,
and the app renders nothing but the token form until the token is given."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ragkit.cli import main
from ragkit.settings import TOKEN_ENV, get_settings

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TOKEN = "correct-horse-battery-staple"


@pytest.fixture
def streamlit_calls(monkeypatch) -> list[dict]:
    """subprocess.call replaced: records the command and environment instead of starting Streamlit."""
    calls: list[dict] = []

    def record(command, env=None, **kwargs):
        calls.append({"command": command, "env": env or {}})
        return 0

    monkeypatch.setattr(subprocess, "call", record)
    return calls


def set_token(monkeypatch, token: str | None) -> None:
    if token is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, token)
    get_settings.cache_clear()


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


@pytest.mark.unit
def test_a_remote_address_without_the_flag_is_refused(streamlit_calls, capsys):
    assert main(["dashboard", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 lets other machines reach the dashboard" in err
    assert "--allow-remote" in err and TOKEN_ENV in err
    assert streamlit_calls == []


@pytest.mark.unit
def test_allow_remote_generates_a_token_prints_it_once_and_warns(streamlit_calls, capsys, monkeypatch):
    set_token(monkeypatch, None)
    assert main(["dashboard", "--host", "0.0.0.0", "--port", "8600", "--allow-remote"]) == 0
    out, err = capsys.readouterr()
    token = out.split("access token (shown only now): ", 1)[1].split()[0]
    assert len(token) >= 32 and out.count(token) == 1
    assert "warning: the dashboard listens on 0.0.0.0:8600" in err and "read files" in err and "run jobs" in err
    [call] = streamlit_calls
    assert call["env"][TOKEN_ENV] == token
    assert token not in " ".join(call["command"])  # `ps` shows command lines to every user
    assert option(call["command"], "--server.address") == "0.0.0.0"
    assert option(call["command"], "--server.enableXsrfProtection") == "true"


@pytest.mark.unit
def test_allow_remote_uses_the_token_from_the_environment_without_printing_it(streamlit_calls, capsys, monkeypatch):
    set_token(monkeypatch, TOKEN)
    assert main(["dashboard", "--host", "192.168.1.5", "--allow-remote"]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and "access token" not in out
    assert "warning:" in err
    assert streamlit_calls[0]["env"][TOKEN_ENV] == TOKEN


@pytest.mark.unit
def test_a_short_token_from_the_environment_is_refused(streamlit_calls, capsys, monkeypatch):
    set_token(monkeypatch, "hunter2")
    assert main(["dashboard", "--host", "0.0.0.0", "--allow-remote"]) == 2
    assert f"{TOKEN_ENV} is 7 characters: use at least 16" in capsys.readouterr().err
    assert streamlit_calls == []


@pytest.mark.unit
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_flag_and_no_token(streamlit_calls, capsys, monkeypatch, host):
    set_token(monkeypatch, None)
    assert main(["dashboard", "--host", host]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err and "access token" not in out
    [call] = streamlit_calls
    assert TOKEN_ENV not in call["env"]
    assert option(call["command"], "--server.enableXsrfProtection") == "true"
    assert option(call["command"], "run") == str(APP) and APP.is_file()  # the app beside the ragkit package
    # No source watching: it scanned every loaded module for each new session (benchmarks/README.md, issue 41).
    assert option(call["command"], "--server.fileWatcherType") == "none"


@pytest.mark.integration
def test_with_a_token_only_the_token_form_renders(monkeypatch):
    set_token(monkeypatch, TOKEN)
    app = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not app.exception
    assert [title.value for title in app.title] == ["ragkit"]
    assert [field.label for field in app.text_input] == ["Access token"]
    assert not app.sidebar.caption and not app.sidebar.markdown  # no data directory, no server details


@pytest.mark.integration
def test_the_right_token_opens_the_pages(monkeypatch):
    set_token(monkeypatch, TOKEN)
    app = AppTest.from_file(str(APP), default_timeout=30).run()
    app.text_input[0].input(TOKEN)
    app.button[0].click().run()
    assert not app.exception and not app.error
    assert app.title[0].value == "Corpora"
    assert "Data directory" in " ".join(caption.value for caption in app.sidebar.caption)


@pytest.mark.integration
def test_a_wrong_token_shows_an_error_and_nothing_else(monkeypatch):
    set_token(monkeypatch, TOKEN)
    app = AppTest.from_file(str(APP), default_timeout=30).run()
    app.text_input[0].input(TOKEN[:-1])
    app.button[0].click().run()
    assert [error.value for error in app.error] == ["Wrong access token."]
    assert [title.value for title in app.title] == ["ragkit"]
    assert not app.sidebar.caption


@pytest.mark.unit
def test_the_demo_runs_the_bundled_quickstart_then_starts_the_app(streamlit_calls, monkeypatch):
    """`make demo` is `ragkit dashboard --demo`: both files it names must exist in a clone."""
    import ragkit.cli.dashboard as dashboard_cli

    ran: list[str] = []
    monkeypatch.setattr(dashboard_cli, "_run_experiment", lambda path: ran.append(path) or 0)
    set_token(monkeypatch, None)
    assert main(["dashboard", "--demo"]) == 0
    [quickstart] = ran
    assert Path(quickstart) == APP.parents[1] / "experiments" / "quickstart.yaml" and Path(quickstart).is_file()
    assert option(streamlit_calls[0]["command"], "run") == str(APP) and APP.is_file()
