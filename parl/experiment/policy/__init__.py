"""A trained policy on its own: ``parl export`` writes it, ``load_policy`` acts with it
(:mod:`.export`); the classes its files name are imported under guard (:mod:`.import_guard`)."""
