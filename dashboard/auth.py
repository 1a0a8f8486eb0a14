"""The access check of a dashboard reachable from other machines: a token before any page.

`ragkit dashboard --allow-remote` hands the token to the Streamlit process in the environment
(RAGKIT_DASHBOARD_TOKEN); with it set, the entry point calls `require_token()` before drawing
anything, and a browser session that has not given the token sees only the token form. A
session keeps its access until its tab is closed. Without a token (the loopback default) the
check is a no-op.
"""

from __future__ import annotations

import hmac

import streamlit as st

from ragkit.settings import get_settings

GRANTED = "ragkit_access_granted"


def configured_token() -> str | None:
    token = get_settings().dashboard_token
    return token.get_secret_value() if token is not None and token.get_secret_value() else None


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not leak how much of a guess was right."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def require_token() -> None:
    """Return when no token is configured or this session gave it; otherwise draw the token form
    and stop the script run, so nothing after the call renders."""
    expected = configured_token()
    if expected is None or st.session_state.get(GRANTED):
        return
    st.title("ragkit")
    with st.form("access"):
        given = st.text_input(
            "Access token", type="password", help="Printed by `ragkit dashboard --allow-remote`, or the value of "
            "RAGKIT_DASHBOARD_TOKEN where the dashboard was started."
        )
        submitted = st.form_submit_button("Open")
    if submitted:
        if token_matches(given, expected):
            st.session_state[GRANTED] = True
            st.rerun()
        st.error("Wrong access token.")
    st.stop()
