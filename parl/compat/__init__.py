"""parl.compat: the deprecated names of earlier versions, served from where their code lives now.

    import parl.framework.agent          # DeprecationWarning: ... use parl.core.agent
    from parl.utils import train_agents  # DeprecationWarning: ... use parl.experiment.trainer.Trainer

:mod:`parl.compat.moved` holds the table of old names and new ones and serves both the moved
modules (through an import hook that ``import parl`` installs) and the moved attributes (through
the ``__getattr__`` of the packages that held them); docs/api.md lists every entry. The other
modules here are the old functions whose replacement takes other arguments. Nothing here is
imported before an old name is used.
"""
