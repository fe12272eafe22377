"""Traces of what PyTorch dispatches, and the reference programs made from them.

``recorder`` and ``worker`` need torch and run only in child processes (``launch`` starts
them); ``format``, ``classes``, ``program`` and ``store`` are pure and read what they wrote.
"""
