"""tb-roofline: roofline analysis of ML profiles, as a TensorBoard plugin and a CLI."""
__version__ = "0.1.0"
