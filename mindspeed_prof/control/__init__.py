"""What starts a window at run time: the trigger file, HTTP routes, captures by themselves, the poll's
one exchange."""
