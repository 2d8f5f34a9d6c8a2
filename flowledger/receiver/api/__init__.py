"""The receiver's HTTP API: its routes (the workflow calls among them, one row each of the call
table, :mod:`.calls`), the guard in front of them, who may call them
(:mod:`~flowledger.receiver.api.auth`), the one error shape, and the models of what it accepts
and answers. The app factory that puts them in front of the engine is
:mod:`flowledger.receiver.app`."""
