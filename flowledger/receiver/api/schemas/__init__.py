"""What the API accepts and shows, as model families: ``*Base`` holds the fields a family
shares, ``*Create`` is what a client may send (unknown fields are errors), ``*Public`` is what
the ledger answers. The stored form is ``flowledger.storage.models``; none of these is a table.

One module per family: :mod:`.operations` (the workflow calls), :mod:`.hooks` (the n8n error
hook), :mod:`.holds` (a person's actions on holds), :mod:`.reads`, :mod:`.errors`; the field
types they share are in :mod:`.fields`.
"""

from flowledger.receiver.api.schemas.errors import ErrorDetailPublic, ErrorPublic
from flowledger.receiver.api.schemas.fields import Id, Receipt, Text, When
from flowledger.receiver.api.schemas.hooks import (
    HookHoldPublic,
    HookPublic,
    N8nErrorCreate,
    N8nErrorDetail,
    N8nExecution,
    N8nWorkflow,
)
from flowledger.receiver.api.schemas.operations import (
    AnswerPublic,
    ApprovalCreate,
    ConfirmCreate,
    DispatchCreate,
    FailCreate,
    OperationBase,
    PrepareCreate,
)
from flowledger.receiver.api.schemas.reads import (
    EventPublic,
    ExecutionPage,
    ExecutionPublic,
    LinkedExecutionPublic,
    OperationDetailPublic,
    OperationPage,
    OperationPublic,
    TokenPublic,
)

__all__ = [
    "AnswerPublic",
    "ApprovalCreate",
    "ConfirmCreate",
    "DispatchCreate",
    "ErrorDetailPublic",
    "ErrorPublic",
    "EventPublic",
    "ExecutionPage",
    "ExecutionPublic",
    "FailCreate",
    "HookHoldPublic",
    "HookPublic",
    "Id",
    "LinkedExecutionPublic",
    "N8nErrorCreate",
    "N8nErrorDetail",
    "N8nExecution",
    "N8nWorkflow",
    "OperationBase",
    "OperationDetailPublic",
    "OperationPage",
    "OperationPublic",
    "PrepareCreate",
    "Receipt",
    "Text",
    "TokenPublic",
    "When",
]
