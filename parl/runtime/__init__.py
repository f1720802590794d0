"""Where agents run: the Manager, the AgentRunner interface and the registry of placements
(threads, cooperative, processes)."""
