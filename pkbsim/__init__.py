"""pkbsim: how fast a multi-GPU kernel could be, how fast it is, and why the two differ."""

__version__ = "0.1.0"
