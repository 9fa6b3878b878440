"""The ``redcron`` command line (click); one module per command family."""
