"""Device peaks: the spec every reader fills, the data-sheet table, derived GPU peaks, device
files and calibration. Never imports the model."""
