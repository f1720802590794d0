"""Placement ``"processes"``: agents in forked worker processes (:mod:`.worker_pool`), predictions
crossing to the parent's wrappers through shared memory (:mod:`.shm_transport`)."""
