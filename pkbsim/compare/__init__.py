"""The comparator: what a candidate kernel does (inspect), what it measured, and the gap to the
roofline in named causes."""
