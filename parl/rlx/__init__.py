"""RLX: environments anywhere (another process, machine or language) connect to a parl robot over TCP.

    import parl.rlx

    with parl.rlx.Client("127.0.0.1:7070") as client:       # a robot served by `parl serve CONFIG`
        parl.rlx.drive(gymnasium.make("CartPole-v1"), client)  # or init / send / reset by hand

The protocol (length-prefixed msgpack, arrays as dtype, shape and bytes, never pickle), its
security model and a client author's byte-level test vectors are in docs/rlx.md. This package is
the protocol and its Python client; the server side is the placement ``"rlx"``
(:mod:`parl.runtime.rlx`). ``import parl`` does not import it.
"""

from parl.rlx.client import Client
from parl.rlx.errors import ProtocolError, ServerError
from parl.rlx.gym_driver import EpisodeResult, drive
from parl.rlx.messages import VERSION

__all__ = ["Client", "EpisodeResult", "ProtocolError", "ServerError", "VERSION", "drive"]
