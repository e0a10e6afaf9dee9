"""The FlexAttention specialisation of the offline tools: its data generator."""
