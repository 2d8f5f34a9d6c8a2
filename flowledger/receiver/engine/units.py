"""A workflow call's unit of work and its answer, built the same way by whichever writer runs
it: the group commit in this process or the writer process."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowledger.receiver.api.calls import CallRequest, work_of
from flowledger.receiver.api.errors import as_api_error
from flowledger.receiver.api.reply import Reply
from flowledger.receiver.engine.idempotency import keyed, settled
from flowledger.services.ledger import Ledger
from flowledger.storage.unit_of_work import Work


def unit_of(ledger: Ledger, call: CallRequest) -> Work[Any]:
    """The unit of work ``call`` stands for, keyed when it carries an ``Idempotency-Key``."""
    work = work_of(ledger, call)
    if call.key is None:
        return work
    return keyed(
        work,
        token_id=call.token_id,
        key=call.key,
        fingerprint=call.fingerprint,
        ttl=timedelta(seconds=call.ttl),
    )


def reply_of(call: CallRequest, value: Any, error: BaseException | None) -> Reply:
    """The answer to ``call`` whose unit returned ``value`` or raised ``error``; its value kept
    only when the caller asked for it (``observe``)."""
    if error is not None:
        return Reply.error(as_api_error(error))
    reply = settled(value)
    return reply if call.observe or reply.value is None else without_value(reply)


def without_value(reply: Reply) -> Reply:
    # A new Reply: ``dataclasses.replace`` showed in the writer's profile (bench/README.md).
    return Reply(reply.status, reply.body, None, reply.replayed, reply.headers)
