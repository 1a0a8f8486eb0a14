"""Query stages: routing (router), rewriting a follow-up (condense), choosing a strategy, query transforms."""
