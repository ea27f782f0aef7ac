"""The verdict: what an audit is compared with and what it must meet, written as history, JUnit, summary, artifacts
and notifications (see ops/__init__.py)."""
