"""Accounts has no background work: lockout counters expire in the cache on their own."""
