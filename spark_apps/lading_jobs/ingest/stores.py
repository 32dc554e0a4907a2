"""One storage client per scheme and S3 settings, per process.

A boto3 client costs far more to build than most of the calls a load task makes
with it, and Spark reuses its Python workers, so tasks and the driver share
cached clients instead of building one per call.
"""

from __future__ import annotations

import functools
from urllib.parse import urlparse

from lading_jobs import storage as st


@functools.lru_cache(maxsize=16)
def _cached(scheme: str, settings: st.S3Settings) -> st.Storage:
    return st.open_storage(f"{scheme}://cache/", settings)


def storage_for(uri: str, settings: st.S3Settings) -> st.Storage:
    """The (cached) storage for ``uri``'s scheme."""
    return _cached(urlparse(uri).scheme, settings)
