"""What a run writes for people and peers: the summary (summary.json), the peers' file shapes, a version's
diagnosis, the gate's and the traffic's reports."""
