"""The receiver's HTTP API: its routes, who may call them (:mod:`~flowledger.receiver.api.auth`),
the one error shape, and the models of what it accepts and answers. The app factory that puts
them in front of the engine is :mod:`flowledger.receiver.app`. The workflow calls are served
by the engine's write lane (:mod:`flowledger.receiver.engine`) from the same call table and
models."""
