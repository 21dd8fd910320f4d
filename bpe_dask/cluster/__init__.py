"""Clusters: a client, its workers checked, tasks run with failures as one line, and progress lines."""
