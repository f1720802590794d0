"""Moved to :mod:`parl.serving.safe_files` (checkpoint reading, in ``parl.serving``, uses it too);
this name is kept for the code that imports it from here."""

from parl.serving.safe_files import FileCheckError, read_regular_file, replace_file

__all__ = ["FileCheckError", "read_regular_file", "replace_file"]
