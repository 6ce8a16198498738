"""One module per tab: its layout and its event handlers, nothing else."""
