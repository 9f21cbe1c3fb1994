"""Topologies have no background work of their own: deploy, delete and drift jobs run in deployments.tasks."""
