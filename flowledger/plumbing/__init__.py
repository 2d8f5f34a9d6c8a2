"""What every layer may use: the clock, the named crash points of the crash tests, and the
Prometheus metrics."""
