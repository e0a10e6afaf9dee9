"""The mm specialisation of the offline tools."""
