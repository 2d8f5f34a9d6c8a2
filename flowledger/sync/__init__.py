"""Pulling execution records from workflow tools into the ledger (see ``runner``)."""

from flowledger.sync.connect import check_source
from flowledger.sync.retry import Backoff
from flowledger.sync.runner import SyncReport, sync_source

__all__ = ["Backoff", "SyncReport", "check_source", "sync_source"]
