"""Placement ``"cooperative"``: every agent a greenlet in one scheduler thread (see :mod:`.runner`);
its C speed-up, ``_cooperative``, is built at install time and used only here."""
