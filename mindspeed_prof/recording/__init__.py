"""The window recorder (DESIGN §6): plan, one session at a time, manifests, exits and flush."""
