"""Renderers: finished result objects in, text or bytes out. Nothing here computes a model or
writes a file; the CLI decides where the output goes."""
