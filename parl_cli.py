"""The ``parl`` command's entry point: Ctrl-C (or SIGTERM) while parl is still starting (importing
paddle takes seconds, before any run has begun) ends it with one line and exit status 130 (143)
instead of a traceback; from then on :mod:`parl.experiment.cli.commands` and the Trainer handle signals.

Kept outside the ``parl`` package so that it runs before ``import parl`` does.
"""

import os
import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    sys.stderr.write(f"parl: stopped by {name} while starting (no run under way; nothing to save)\n")
    sys.stderr.flush()
    os._exit(128 + signum)


def main() -> int:
    """Run the ``parl`` command line with the start-up signal handlers in place."""
    previous = {signum: signal.signal(signum, _interrupted) for signum in (signal.SIGINT, signal.SIGTERM)}
    from parl.experiment.cli.commands import main as cli_main  # noqa: PLC0415 - after the handlers, on purpose

    for signum, handler in previous.items():
        if signal.getsignal(signum) is _interrupted:  # the CLI has not installed its own
            signal.signal(signum, handler)
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
