"""weakspot's operations, beside the library: the ``weakspot`` command and everything that runs the audit as a
pipeline on a checkout (DVC, the shared Prefect server, the audit lock, the history of past audits, their
comparison and verdict, lineage, exact reruns, the nightly schedule).

Caveats first: this package knows the repository's file layout and drives DVC and Prefect; the library
(:mod:`weakspot`) imports nothing from here (tests/test_imports.py checks it). Importing :mod:`ops.params` registers
the ``history`` and ``execution`` sections of params.yaml with :mod:`weakspot.config`; nothing is imported here, so
``import ops.<module>`` loads only that module and what it needs.

    ops/cli.py       the ``weakspot`` command: argument parsing, one thin function per command
    ops/audit.py     ``weakspot audit``: the lock, the stages on workers (or in the checkout), the history record and comparison, the report
    ops/pipeline.py  dvc.yaml, generated from params.yaml
    ops/dvc.py       the dvc executable, the pipeline's environment, dvc repro, the DVC remote, push
    ops/graph.py     the stage graph, read from dvc.yaml
    ops/snapshot.py  the workspace as audited, a commit on a private ref
    ops/scheduler.py the stages as flow runs on work pools: keep going past a failure, resubmit a dead worker's
    ops/stage_flow.py the flow a worker runs: dvc repro --pull STAGE in a clone, dvc push --run-cache
    ops/workers.py   the work pools, the stage deployments, local process workers
    ops/server.py    the Prefect server every stage of a run shares
    ops/serve.py     ``weakspot serve``: the nightly flow (flows/audit.py) on a cron schedule
    ops/profile.py   ``weakspot profile``: a profile merged into params.yaml
    ops/lock.py      one audit at a time per checkout
    ops/history.py   the store of past audits and the comparison by params.yaml's rules
    ops/verdict.py   the comparison's verdict as Prefect artifacts
    ops/lineage.py   the chain of stages behind an artifact or a number
    ops/rerun.py     a past audit reproduced in a scratch git worktree
    ops/params.py    params.yaml's ``history`` and ``execution`` sections
"""
