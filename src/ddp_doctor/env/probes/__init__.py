"""Probes: each returns plain data (JSON-able dicts) and never prints or raises for an
environment problem. facts.gather() runs them, the slow ones concurrently."""
