"""The webhook receiver: the HTTP API that workflows call before and after each write."""

from flowledger.receiver.app import create_app

__all__ = ["create_app"]
