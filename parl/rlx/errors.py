"""The errors of the RLX protocol: the codes an ``error`` message carries, and the exceptions raised.

    raise ProtocolError(BAD_MESSAGE, "step: reward is nan (not finite)")   # the server ends that connection
    except ServerError as exc: exc.code == BUSY                             # a client told no by the server

Every code, and what a client should do about it, is in docs/rlx.md ("Errors").
"""

from __future__ import annotations

#: No room: the server has ``max_clients`` connections, or less free memory than its floor. Retry later.
BUSY = "busy"
#: The hello's token is missing or wrong.
UNAUTHORIZED = "unauthorized"
#: The hello asks for a protocol version the server does not speak.
VERSION = "version"
#: The bytes are not a frame: a length of 0 or over the limit, or a body that is not one msgpack map.
BAD_FRAME = "bad_frame"
#: A frame that decodes but is not a message the server takes now: unknown type, missing or unknown
#: fields, values of the wrong type, shape or range, or a message out of order.
BAD_MESSAGE = "bad_message"
#: The client said nothing for the idle timeout, sent no hello in time, or played one episode too long.
TIMEOUT = "timeout"
#: The server is stopping.
SHUTDOWN = "shutdown"
#: The server failed on this connection's request; the connection ends, the server goes on.
SERVER_ERROR = "server_error"

CODES = (BUSY, UNAUTHORIZED, VERSION, BAD_FRAME, BAD_MESSAGE, TIMEOUT, SHUTDOWN, SERVER_ERROR)


class ProtocolError(ValueError):
    """Bytes or a message that break the protocol: the peer that sent them gets (or has sent) an
    ``error`` message with :attr:`code`, and the connection ends.

    Attributes:
        code: one of :data:`CODES`.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ServerError(ConnectionError):
    """The server sent an ``error`` message (and closed the connection).

    Attributes:
        code: one of :data:`CODES` (``busy``, ``unauthorized``, ``shutdown``, ...).
        message: the server's explanation.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"server error {code}: {message}")
        self.code = code
        self.message = message
