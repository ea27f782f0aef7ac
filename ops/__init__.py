"""weakspot's operations, beside the library: the ``weakspot`` command and everything that runs the audit as a
pipeline on a checkout, one package per concern.

Caveats first: this package knows the repository's file layout and drives DVC and Prefect; the library
(:mod:`weakspot`), the stages' flows (``flows/``) and their tasks (``tasks/``) import nothing from here
(tests/test_imports.py checks it): the report stage reads what the verdict wrote. Nothing is imported here, so
``import ops.<package>.<module>`` loads only that module and what it needs.

    ops/cli.py        the ``weakspot`` command: argument parsing, one thin function per command
    ops/serve.py      ``weakspot serve``: the nightly flow on a cron schedule, and its UI
    ops/profile.py    ``weakspot profile``: a profile merged into params.yaml
    ops/engine/       the engine: the audit as one Prefect flow run (audit, audit_flow), the nightly flow (nightly),
                      the stage graph (graph), dvc.yaml (pipeline), workers and the flow they run (workers,
                      stage_flow), a lost worker (lost), the workspace's snapshot (snapshot), the Prefect server
                      (server), the audit lock (lock), DVC's CLI (dvc)
    ops/verdict/      the verdict: the history of audits and its comparison (history), gates, JUnit and summary
                      (files), Prefect artifacts (artifacts), notifications (notify), two audits side by side
                      (compare), plots-diff
    ops/provenance/   provenance: the chain behind a number (lineage), a past audit reproduced (rerun)
"""
