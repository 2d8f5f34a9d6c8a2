"""Pulling execution records from workflow tools into the ledger (see ``runner``)."""

from ledger.sync.connect import check_source
from ledger.sync.retry import Backoff
from ledger.sync.runner import SyncReport, sync_source

__all__ = ["Backoff", "SyncReport", "check_source", "sync_source"]
