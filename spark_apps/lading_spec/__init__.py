"""The job contract: the specs of lading's resources, validated and defaulted.

Pure Python with no Spark and no Kubernetes client, so that the operator (which
renders and validates) and the Spark apps (which execute) read one definition.
"""
