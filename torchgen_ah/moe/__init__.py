"""The mixture-of-experts specialisation of the offline tools: its grouped-GEMM data generator."""
