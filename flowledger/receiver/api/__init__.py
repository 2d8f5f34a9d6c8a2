"""The receiver's HTTP API: the app factory (:mod:`~flowledger.receiver.api.app`), its routes,
who may call them (:mod:`~flowledger.receiver.api.auth`), the one error shape, and the models
of what it accepts and answers. The workflow calls are served by the engine's write lane
(:mod:`flowledger.receiver.engine`) from the same call table and models."""
