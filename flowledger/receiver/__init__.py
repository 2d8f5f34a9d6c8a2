"""The webhook receiver: the HTTP API that workflows call before and after each write
(:func:`flowledger.receiver.app.create_app`), its engine that writes them durably, and the
server that runs it (:mod:`flowledger.receiver.server`)."""
