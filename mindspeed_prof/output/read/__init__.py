"""File scanners: find the captures under a save path and read each kind of file they hold.

discover (captures, manifests), jobruns (which run to judge), windows (the manifest
window listing a capture), roles (the RL role layout), profinfo (what a capture was asked to
collect); jsonstream/tracescan (chrome traces), csvrows/csvtable/columns/kernels (CSV
tables), sqlitecheck/dbsummary (databases), logscan (parser logs); errors (why a file cannot
be used). They know no verdict and no summary: check/ and summary/ build on them.
"""
