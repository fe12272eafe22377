"""Hardware validation: run measurements, fit the model to them, report its error."""
