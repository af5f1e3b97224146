"""When and how the pipeline runs: Definitions, jobs and the command line."""
