# The package version, in one place: pyproject.toml reads it (tool.setuptools.dynamic), hsma_trsm exports it.
__version__ = "0.1.0"
