"""The comparator: measured kernels against the roofline and the simulator, and the gap split
into named causes (``gap``), per problem and per logs folder (``comparison``)."""
