"""One Chrome-trace/Perfetto file of many ranks' captures: chosen (choose), clocks aligned (clock), streamed (write, merge)."""
