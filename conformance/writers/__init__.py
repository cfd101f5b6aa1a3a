"""Peer consumers of the run's events: console progress, report.json, report.md,
junit.xml. Each renders from the events alone."""
