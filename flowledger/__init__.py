"""flowledger: business checkpoints for workflow tools that outlive their execution history."""

__version__ = "0.1.0"
