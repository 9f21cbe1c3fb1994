"""The audit log has no background work: events are written by the services that make changes."""
