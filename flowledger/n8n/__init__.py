"""What is n8n's alone on the ledger's side: ``flowledger n8n setup`` (:mod:`.setup`) and the
workflow templates it installs (``templates/``, package data). The connector that syncs n8n's
executions is :mod:`flowledger.connectors.n8n`, beside the other tools'."""
