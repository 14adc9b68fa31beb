"""Past one machine: each node checks and summarises its share of the job's ranks and writes
a mergeable report (share, node_report); one command merges the reports into the job's verdict
and summary (merge), slow ranks against the whole job's median.
"""
