"""Measured and modelled timelines of a call, and where their time went (issue 32)."""
