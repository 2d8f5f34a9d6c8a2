"""The scheduled side: the sweep, alert delivery, the lease, the scheduler and the
hourly clean-up."""
