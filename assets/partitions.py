"""The partition key spaces, declared once: one partition per dataset version; one per day (or hour) of traffic."""
import dagster as dg

from rag_eval.metrics.sources.traffic import TrafficConfig

#: The name of the dataset versions' partitions (``dataset_versions.name``, typed ``str``).
DATASET_VERSIONS = "dataset_version"
dataset_versions = dg.DynamicPartitionsDefinition(name=DATASET_VERSIONS)


def traffic_partitions(config: TrafficConfig) -> dg.TimeWindowPartitionsDefinition:
    """The traffic's time partitions of ``config`` (``rag_eval.metrics.sources.traffic.TrafficConfig``): a day
    (``partition = "daily"``) or an hour (``"hourly"``) from ``start``, in ``timezone``. ``start`` is set
    (``TrafficConfig.started`` sets the default, the first day with traces)."""
    if config.partition == "hourly":
        return dg.HourlyPartitionsDefinition(start_date=f"{config.start}-00:00", timezone=config.timezone)
    return dg.DailyPartitionsDefinition(start_date=config.start, timezone=config.timezone)
