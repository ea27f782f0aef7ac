"""A lost worker, noticed by Prefect: every flow run sends a heartbeat event every ``execution.heartbeat_seconds``
(Prefect's ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, at least 30 s), and the automation ``weakspot-lost-stage`` marks a
weakspot flow run Crashed when no heartbeat nor final state came within three of them: its worker was killed, or
its machine vanished. The audit's flow (:mod:`ops.engine.audit_flow`) then runs the stage again on a live worker.

Caveats first: this is the mechanism Prefect documents for zombie flow runs (an event trigger with a proactive
posture and a change-flow-run-state action), created through its public client; it acts only on flow runs tagged
``weakspot``. Its trigger is evaluated by the server's triggers service (on in the server :mod:`ops.engine.server`
starts; a user's own server has it on by default). The automation is replaced when the audit starts (its window
follows params.yaml) and kept afterwards: a worker lost while no audit runs is still marked.
"""

from __future__ import annotations

import datetime
from typing import Any
from uuid import UUID

NAME = "weakspot-lost-stage"
#: heartbeats a flow run may miss before it is marked Crashed
MISSED = 3
FINAL = ("Completed", "Failed", "Cancelled", "Crashed", "TimedOut")


def automation(heartbeat_seconds: int) -> Any:
    """The automation (a Prefect ``AutomationCore``, not created): after a heartbeat of a flow run tagged
    ``weakspot``, expect another heartbeat or a final state within :data:`MISSED` heartbeats, else Crashed."""
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    window = MISSED * int(heartbeat_seconds)
    trigger = EventTrigger(
        after={"prefect.flow-run.heartbeat"},
        expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{s}" for s in FINAL)},
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related=[{"prefect.resource.role": "tag", "prefect.resource.id": "prefect.tag.weakspot"}],
        for_each={"prefect.resource.id"},
        posture=Posture.Proactive,
        threshold=1,
        within=datetime.timedelta(seconds=window),
    )
    return AutomationCore(
        name=NAME,
        description=f"weakspot: a flow run with no heartbeat for {window} s lost its worker: Crashed, run again",
        enabled=True,
        trigger=trigger,
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"no heartbeat for {window} s: its worker or machine was lost",
            )
        ],
    )


def install(heartbeat_seconds: int) -> UUID:
    """(Re)create the automation on PREFECT_API_URL's server, replacing one of its name; its id."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for a in client.read_automations_by_name(NAME):
            client.delete_automation(a.id)
        return client.create_automation(automation(heartbeat_seconds))
