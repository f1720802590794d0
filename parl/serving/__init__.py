"""How many agents' requests become one call: ComputationWrapper and its statistics,
ComputationTask, the in-process communicator, request queues, shared parts, input transforms."""
