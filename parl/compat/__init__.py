"""parl.compat: what old names need besides a new path: the functions of parl 0.1 whose replacement
takes other arguments, served under their old names by :mod:`parl.moved_names`.

    from parl.utils import train_agents  # parl.compat.training.train_agents, with a DeprecationWarning
    import parl.utils.cli                # parl.compat.example_cli, with a DeprecationWarning

Nothing here is imported before an old name is used; docs/api.md lists every deprecated name.
"""
