"""Authoring: the rules behind ``add``, ``remove``, ``edit`` and the overlay commands.

The CLI parses flags and calls in here; everything a user can get wrong is raised as
a one-line ``errors.MonitorsError``. One module per job:

* ``arguments``: the arguments every authoring command shares: monitor and device
  names, ``--devices`` and ``KEY=VALUE`` label lists, the command line written into
  generated headers.
* ``adddoc``: ``add``'s flags (an ``AddRequest``) -> a schema-checked monitor document.
* ``locate``: where a monitor is defined (user file, built-in, or both).
* ``duplicates``: ``add``'s name and behaviour (fingerprint) collisions.
* ``userfiles``: ``remove`` (delete a user file) and ``edit``'s shadowing copy of a
  built-in.
* ``overlayedit``: the overlay commands' targets (NAME or labels), ``pause --until``
  and how a new pause merges with the one already there.

The package must not import click, print, or write into ``system/``; the
``__init__`` stays empty so importing one module loads only what it needs.
"""
