"""Roofline model: the op table readers produce, and the records, comparisons and guidance
built from it. Knows nothing of file formats or HTTP."""
