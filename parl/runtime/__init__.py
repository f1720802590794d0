"""Where agents run: the Manager, the AgentRunner interface and the registry of placements, each
placement a folder with its runner, its options type and one ``register`` call (threads,
cooperative, processes, ray, rlx); what two of them share lives here (error records, concurrent
episodes, ``ray_cluster``: joining Ray)."""
