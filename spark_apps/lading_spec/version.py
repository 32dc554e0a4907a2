"""lading's version, in the source itself: the image runs the source from PYTHONPATH, without
package metadata, so this is what the operator reports (``lading_build_info``) and the chart's
``appVersion`` and ``pyproject.toml`` must agree with (tests/test_version.py)."""

VERSION = "0.1.0"
