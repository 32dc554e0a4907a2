"""Input sources: file sets read through lading_jobs.storage as a Python data source."""
