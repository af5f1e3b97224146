"""What every metric stands on: samples, results, the Metric base class, the registry, scoring, settings files,
custom metrics from YAML, optional extras and the Spark executor."""
